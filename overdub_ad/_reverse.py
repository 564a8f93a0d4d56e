"""Reverse mode: a tape recorded by a context, swept backwards with the ``defvjp`` rules.

``vjp(f, *primals)`` makes a fresh :class:`ReverseContext`, tags each input leaf with a tape
node and overdubs ``f``.  A C function (or one with a rule) receiving a tagged value is a
primitive: it runs on plain values (through the enclosing context, if any) and appends an entry
``(fn, primal arguments, output, argument nodes)`` to the tape; its output is tagged with a new
node.  The pullback walks the tape backwards, calling each argument's rule on the output
cotangent and summing into the argument's node (broadcast dimensions summed away).

Nesting: the backward sweep runs *under the context that encloses the call* (via a bare inner
context, which forwards everything to its parent), so ``grad(grad(f))`` differentiates the
sweep itself and ``jacfwd(grad(f))`` pushes tangents through it: Hessians are
forward-over-reverse.  With no enclosing context, scalar arithmetic on floats is recorded as
its local partial derivatives (one multiply per argument in the sweep) and the sweep
accumulates into buffers it owns, in place.

Mutation: arrays are versioned.  Writing into an array (``a[i] = v``, ``a += b``,
``np.add(a, b, out=a)``, ``np.copyto``, ``a.fill``, ``a.sort()``) records a functional update on
the tape and makes the array stand for its new node; a write into a *view* (``a[i][j] = v``,
``b = a[1:]; b += 1``) updates the array it views, and views read after a write see the new
values.  Values an entry needs that are later overwritten in place are copied first, so the
backward pass sees the values the forward pass used.  The array object itself is never
replaced: a preallocated cache outside the function keeps working, and holds plain numbers.

Containers: a differentiated value stored into a list or dict (``append``, ``insert``,
``extend``, ``xs[i] = v``, ``d[k] = v``, ``setdefault``) is stored as it is, so that native
iteration (``for v in xs``, ``sum(xs)``, ``np.stack(xs)``) keeps its derivative; when ``f``
returns, those containers get plain values back.  Iterating a differentiated array (``for
row in x``, ``list(x)``, ``zip(x, y)``, ``a, b = x``) is seen through a pass that makes
iteration a call (``iter(...)``).

Coverage: a NumPy function without a rule whose implementation is Python (``np.polyval``,
``np.cov``, ``np.linalg.pinv``...) is differentiated through NumPy's own code; the C functions
NumPy's code calls directly are the public functions' rules.  A C function without a rule, or
a Python function without source, that receives a differentiated value -- also inside a list
-- raises :class:`MissingRuleError`: a derivative is never silently dropped.

A function-valued result has a function for its gradient (Jacobian), applied lazily as forward
mode's derivative of one is: ``grad(lambda x: lambda y: x * y)(2.0)`` is ``y -> y``.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
import numbers
import operator
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from overdub import (Context, Tagged, can_recurse, carries_tags, current_context, is_opaque,
                     keeps_heap_metadata, opaque, overdub, recurse, tag, untag)


from . import _arrays, _callbacks, _routes, _rules, _specialise
from ._arraylike import array_like, stackable, takes_arrays
from ._forward import (CONSUMERS, _zero, by_differentiated_key, custom_jvp, keyed_read,
                       iterate_through, python_iterable)
from ._forward import (_check_differentiated, _check_output, _entry, _method_of,
                       _no_derivative_lost, _not_a_number, _untag_bindings, _user_operator)
from ._pytree import flatten, node_children, rebuild_node, reveal, unflatten

_PYTHON_CODE = (types.FunctionType, types.MethodType, functools.partial)
_Order = Literal["K", "A", "C", "F"]  # NumPy's memory orders
_BuiltinMethod = types.BuiltinMethodType  # type([].append)
# isinstance tuples typed loosely: NumPy's stubs reject the numbers.Number they would narrow to
_NUMERIC: tuple[type[Any], ...] = (numbers.Number, np.ndarray, np.generic)
_SCALAR: tuple[type[Any], ...] = (float, complex, np.generic)
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub,
            operator.imul: operator.mul, operator.itruediv: operator.truediv,
            operator.ipow: operator.pow, operator.imatmul: operator.matmul}
# In-place operators whose rules read the target's old value (add/sub only need its shape).
_READS_TARGET = {operator.imul, operator.itruediv, operator.ipow, operator.imatmul}
_REAL_TYPES = frozenset({float, int, np.float64})
# Values _untag_bindings would skip: no closure (a Tagged one is not a function to it either)
_NOT_FUNCTIONS = frozenset({float, int, complex, np.float64, np.ndarray, Tagged})
_NATIVE_CONTAINERS = frozenset({tuple, list, range, dict, str})


class _Node:
    """A differentiated value on the tape (identity only).  ``gen``: for a view of an array
    that is written in place, the write generation of that array the view's value belongs to."""

    __slots__ = ("__weakref__", "gen")


class _Entry:
    """One primitive call: how to send its output cotangent back to its arguments."""

    __slots__ = ("fn", "primals", "kwargs", "out", "inputs", "outputs", "joint", "rules")

    def __init__(self, fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
                 inputs: list[Any], outputs: Any, joint: Callable[..., Any] | None = None,
                 rules: tuple[Any, ...] | None = None) -> None:
        self.fn, self.primals, self.kwargs, self.out = fn, primals, kwargs, out
        self.inputs = inputs    # per positional argument: a node, a (nested) list of them, None
        self.outputs = outputs  # a node, or a tuple of nodes (None for integer outputs)
        self.joint = joint      # custom_vjp / checkpoint: ct -> all argument cotangents
        self.rules = rules      # fn's reverse rules, when looked up already (else: the table)


# Scalar entries are flat tuples, whose output node is the entry's position on the tape (an int:
# the sweep keeps their cotangents in a list by position; and ints, unlike objects, are not
# tracked by the garbage collector, so that these entries -- tens of thousands in a scalar loop,
# one tuple each -- leave its scans): ``(output node, node, partial, node, partial, ...)`` for
# float arithmetic (an odd length: each argument's node and the local partial derivative in it),
# ``(output node, array node, index, placeholder)`` for ``x[i]``.


def _innermost(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x


def _is_differentiable(x: Any) -> bool:
    """A float or complex number or array (an enclosing context's tags looked through)."""
    x = _innermost(x)
    t = type(x)
    if t is float or t is np.float64:
        return True
    if t is int:
        return False
    if isinstance(x, _NUMERIC):
        return not isinstance(x, bool) and np.result_type(x).kind in "fc"
    return _arrays.is_foreign_array_type(t) and _arrays.kind(x) in "fc"


def _root(a: np.ndarray) -> np.ndarray:
    """The array whose memory ``a`` views (``a`` itself if it owns its data)."""
    base = a.base
    while isinstance(base, np.ndarray):
        a, base = base, base.base
    return a


_PLACEHOLDERS: dict[tuple[Any, ...], np.ndarray] = {}  # (shape, dtype) -> placeholder


def _placeholder(x: Any) -> Any:
    """A stand-in for ``x`` with its shape and dtype and no memory (for rules that need only
    those): a read-only broadcast of one zero."""
    if type(x) is not np.ndarray:
        x = _innermost(x)
        if not isinstance(x, np.ndarray):
            return 0.0 * x if isinstance(x, _SCALAR) else x
    key = (x.shape, x.dtype)
    ph = _PLACEHOLDERS.get(key)
    if ph is None:
        if len(_PLACEHOLDERS) > 4096:
            _PLACEHOLDERS.clear()
        ph = _PLACEHOLDERS[key] = np.broadcast_to(np.zeros((), x.dtype), x.shape)
    return ph


def _element_index(view: np.ndarray, root: np.ndarray) -> tuple[Any, ...] | None:
    """The elements of ``root`` that ``view`` shows, as an advanced index of ``root`` with the
    view's shape; None if ``view`` does not map element-wise onto ``root``."""
    if view.dtype != root.dtype:
        return None
    item = root.itemsize
    start = view.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if start % item or any(s % item for s in view.strides) or \
            any(s % item for s in root.strides):
        return None
    pos = np.full(view.shape, start // item, dtype=np.intp)
    for k, (n, s) in enumerate(zip(view.shape, view.strides)):
        shape = [1] * view.ndim
        shape[k] = n
        pos = pos + (np.arange(n, dtype=np.intp) * (s // item)).reshape(shape)
    strides = [s // item for s in root.strides]
    order = sorted((k for k in range(root.ndim) if root.shape[k] > 1), key=lambda k: -strides[k])
    if any(strides[k] <= 0 for k in order):
        return None
    index = [np.zeros(view.shape, np.intp) for _ in range(root.ndim)]
    rest = pos
    for k in order:
        index[k], rest = np.divmod(rest, strides[k])
    if np.any(rest != 0) or any(np.any(i >= n) for i, n in zip(index, root.shape)):
        return None
    return tuple(index)


def _advanced(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (list, np.ndarray, bool, np.bool_)) for i in items)


def _basic(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or type(i) in (int, slice) or isinstance(i, np.integer)
               for i in items)


# -- iteration made visible -----------------------------------------------------------------

# Builtins that iterate their arguments: a differentiated array given to them is first split
# into its (differentiated) elements.
_ITERATORS = {id(f): f for f in (
    iter, list, tuple, enumerate, zip, reversed, map, filter, sorted, set, frozenset,
    itertools.chain, itertools.chain.from_iterable, itertools.islice, itertools.zip_longest,
    itertools.product, itertools.permutations, itertools.combinations,
    itertools.combinations_with_replacement, itertools.cycle, itertools.tee, itertools.repeat,
    itertools.compress, itertools.dropwhile, itertools.takewhile, itertools.filterfalse,
    itertools.starmap, itertools.groupby, itertools.accumulate, functools.reduce,
    *[getattr(itertools, name) for name in ("pairwise", "batched") if hasattr(itertools, name)])}
# C functions that only compare and move values (heaps, sorted insertion): run natively with
# the tagged values themselves, which they store as they are.
_MOVING = {id(f): f for f in (heapq.heappush, heapq.heappop, heapq.heapify, heapq.heappushpop,
                              heapq.heapreplace, bisect.insort, bisect.insort_left,
                              bisect.insort_right, bisect.bisect, bisect.bisect_left,
                              bisect.bisect_right,
                              functools.partial)}  # (its arguments kept, tags and all)
_STORES = frozenset({"append", "insert", "extend", "__setitem__", "setdefault", "update"})


# -- fast scalar partials (no enclosing context) -----------------------------------------------

_NOT_ITERATORS = frozenset({int, float, complex, bool, str, bytes, list, tuple, dict, set,
                            frozenset, range, type(None), np.ndarray, Tagged, slice})


def _is_iterator(x: Any) -> bool:
    t = type(x)
    return t not in _NOT_ITERATORS and hasattr(t, "__next__")


def _sign(a: float) -> float:
    return 1.0 if a > 0 else -1.0 if a < 0 else 0.0


def _p_pow(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...] | None:
    pa = pb = 0.0
    if da:
        if b == 0:
            pa = 0.0
        elif a == 0 and b < 1:
            return None
        else:
            pa = b * a ** (b - 1)
    if db:
        if a > 0:
            pb = out * math.log(a)
        elif a == 0:
            pb = 0.0
        else:
            return None
    return pa, pb


def _p_div(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...] | None:
    if b == 0:
        return None
    return 1.0 / b, -out / b


def _ADD(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...]:
    return _ONES


def _SUB(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...]:
    return _ONE_MINUS_ONE


def _MUL(a: Any, b: Any, out: Any, da: bool, db: bool) -> tuple[Any, ...]:
    return b, a


_ONES = (1.0, 1.0)
_ONE_MINUS_ONE = (1.0, -1.0)
_BINARY_PARTIALS: dict[Any, Callable[..., tuple[Any, ...] | None]] = {
    operator.add: _ADD,
    operator.sub: _SUB,
    operator.mul: _MUL,
    operator.truediv: _p_div,
    operator.pow: _p_pow,
}
for _inplace, _pure in _INPLACE.items():
    if _pure in _BINARY_PARTIALS:
        _BINARY_PARTIALS[_inplace] = _BINARY_PARTIALS[_pure]
_BINARY_PARTIALS.update({np.add: _BINARY_PARTIALS[operator.add],
                         np.subtract: _BINARY_PARTIALS[operator.sub],
                         np.multiply: _BINARY_PARTIALS[operator.mul],
                         np.true_divide: _p_div, np.power: _p_pow, math.pow: _p_pow,
                         pow: _p_pow})


def _nonzero(p: Callable[..., Any]) -> Callable[..., Any]:
    def partial(a: Any, out: Any) -> Any:
        return None if out == 0 else p(a, out)
    return partial


_UNARY_PARTIALS: dict[Any, Callable[[Any, Any], Any]] = {
    operator.neg: lambda a, out: -1.0, operator.pos: lambda a, out: 1.0,
    abs: lambda a, out: _sign(a), operator.abs: lambda a, out: _sign(a),
    float: lambda a, out: 1.0,
    math.sin: lambda a, out: math.cos(a), math.cos: lambda a, out: -math.sin(a),
    math.tan: lambda a, out: 1.0 + out * out, math.exp: lambda a, out: out,
    math.log: lambda a, out: 1.0 / a, math.sqrt: _nonzero(lambda a, out: 0.5 / out),
    math.tanh: lambda a, out: 1.0 - out * out, math.sinh: lambda a, out: math.cosh(a),
    math.cosh: lambda a, out: math.sinh(a), math.atan: lambda a, out: 1.0 / (1.0 + a * a),
    math.log1p: lambda a, out: 1.0 / (1.0 + a), math.expm1: lambda a, out: out + 1.0,
    math.erf: lambda a, out: 2.0 / math.sqrt(math.pi) * math.exp(-a * a),
    math.fabs: lambda a, out: _sign(a),
    np.negative: lambda a, out: -1.0, np.sin: lambda a, out: math.cos(a),
    np.cos: lambda a, out: -math.sin(a), np.tan: lambda a, out: 1.0 + out * out,
    np.exp: lambda a, out: out, np.tanh: lambda a, out: 1.0 - out * out,
    np.sqrt: _nonzero(lambda a, out: 0.5 / out), np.square: lambda a, out: 2.0 * a,
    np.arctan: lambda a, out: 1.0 / (1.0 + a * a), np.sinh: lambda a, out: math.cosh(a),
    np.cosh: lambda a, out: math.sinh(a), np.absolute: lambda a, out: _sign(a),
    np.log1p: lambda a, out: 1.0 / (1.0 + a), np.expm1: lambda a, out: out + 1.0,
}
_UNARY_PARTIALS[np.log] = lambda a, out: None if a <= 0 else 1.0 / a
# by id: the functions are kept alive by the dicts above, so their ids stay theirs.  The
# partials are those of the shipped rules: an entry is in _FAST1/_FAST2 only while its
# function's rules are the shipped ones (a rule the user registers wins), rebuilt on change.
_BINARY_OPERATIONS = frozenset(map(id, _BINARY_PARTIALS))
_FAST1: dict[int, Any] = {}
_FAST2: dict[int, Any] = {}
_FAST: dict[int, Any] = {}


@_rules.on_change
def _fast_tables() -> None:
    on = _routes.enabled("reverse-partials")
    for table, partials in ((_FAST1, _UNARY_PARTIALS), (_FAST2, _BINARY_PARTIALS)):
        table.clear()
        table.update({id(f): p for f, p in partials.items() if on and _rules.is_shipped(f)})
    _FAST.clear()
    _FAST.update({**_FAST1, **_FAST2})


# -- the context --------------------------------------------------------------------------------

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
        # Recording for a second derivative of the tape itself (see _hvp): every entry keeps
        # its function and all its values (no local partials, nothing left out)
        self.second = False
        # Containers holding this context's tagged values natively: id -> (container, name)
        self.stores: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._store_limit = 256
        # id -> (Python function, is it a primitive, the rules' version then)
        self._functions: dict[int, tuple[Any, bool, int]] = {}
        # Python functions run by their specialised versions (see _specialise): id -> (fn, it)
        self._specs: dict[int, tuple[Any, Any]] = {}
        self._ref: Any = None
        self._label = f"{type(self).__name__} context at {id(self):#x}"

    def metadata_type(self, value_type: type) -> Any:
        if _arrays.is_numeric_type(value_type):
            return _Node
        return None

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
                return None
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
        from its closure cells, its defaults or a partial's arguments (and theirs, for the
        functions among them)."""
        if isinstance(fn, functools.partial):
            captured = [fn.func, *fn.args, *fn.keywords.values()]
        else:
            fn = getattr(fn, "__func__", fn)  # (a bound method's function)
            if type(fn) is not types.FunctionType:
                return False
            captured = [*_cell_values(fn), *(fn.__defaults__ or ()),
                        *(fn.__kwdefaults__ or {}).values()]
        return any(self._carries(v) or (depth < 4 and callable(v)
                                        and self._closes_over(v, depth + 1)) for v in captured)

    def _carries(self, x: Any, depth: int = 0) -> bool:
        if self._node(x) is not None:
            return True
        if depth < 3 and type(x) in (list, tuple):
            return any(self._carries(v, depth + 1) for v in x)
        if depth < 3 and type(x) is dict:
            return any(self._carries(v, depth + 1) for v in x.values())
        return False

    # -- which calls are ours ----------------------------------------------------------------
    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
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
            # user code, called again and again: the decision kept for this run, made below
            # by the same checks while the rules were as they are
            known = self._functions.get(id(fn))
            if known is not None and known[0] is fn and known[2] == _rules.version:
                return known[1]
        decision = _DECISIONS.get(id(fn))
        if decision is not None and decision[0] is fn:  # never a replacement nor an alias
            return decision[1]
        if fn is operator.setitem or fn is operator.delitem:  # (never a kept decision)
            container = _innermost(args[0])
            if isinstance(container, np.ndarray) or type(container) in (list, dict, np.flatiter) \
                    or _dict_storing(container) or _arrays.is_foreign_array(container):
                return True
            return not isinstance(getattr(type(container), "__setitem__", None),
                                  types.FunctionType)
        if _rules.method_with_rules(fn, _rules.vjp_rules) is not None:
            return True  # model.energy(x), a.dot(y): the method's rules (see execute)
        if _replacement(fn) is not None:
            return True
        fn = _public(fn)
        decision = _DECISIONS.get(id(fn))
        if decision is not None and decision[0] is fn:
            return decision[1]
        if fn is getattr or fn is dict or isinstance(fn, custom_vjp) or id(fn) in _ITERATORS \
                or (type(fn) is custom_jvp and fn.jvp is not None) \
                or id(fn) in _MOVING:
            return True
        if type(fn) is _BuiltinMethod and type(fn.__self__) in (list, dict) and (
                fn.__name__ in _STORES or fn.__name__ in ("get", "pop")):
            return True  # (get and pop: a differentiated default, which the core would strip)
        if _rules.vjp_rules(fn) is not None or _rules.is_nondifferentiable(fn):
            _remember(fn, True)
            return True
        if carries_tags(fn):
            _remember(fn, False)
            return False  # the tag machinery moves it (heap), or looks at the plain value
        if type(fn) is types.FunctionType:
            # the decision is kept for this run (a strong reference, so the id stays the
            # function's), and across runs whether the core can recurse into it (the same
            # each time)
            seen = _RECURSIVE.get(fn)
            if seen is not None and seen[0] is fn.__code__ and seen[1] is type(self):
                decided = False
            else:
                decided = _sourceless(fn) and not can_recurse(self, fn, *args, **kwargs)
                if not decided:
                    _RECURSIVE[fn] = (fn.__code__, type(self))
            if not decided and not self.nested and not self.second and \
                    _routes.enabled("reverse-specialised"):
                spec = _specialise.specialised(fn)
                if spec is not None:  # run by execute, arithmetic expanded in place
                    self._specs[id(fn)] = (fn, spec)
                    decided = True
                    _routes.ran("reverse-specialised", fn)
                else:
                    _routes.declined("reverse-specialised", "outside the compiled subset", fn)
            self._functions[id(fn)] = (fn, decided, _rules.version)
            return decided
        python = isinstance(fn, _PYTHON_CODE) or isinstance(getattr(type(fn), "__call__", None),
                                                            types.FunctionType)
        if python:
            return _sourceless(fn) and not can_recurse(self, fn, *args, **kwargs)
        return not can_recurse(self, fn, *args, **kwargs)

    def _indirect(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """A call without a differentiated argument of its own: written arrays, containers of
        differentiated values, keywords, ``out=`` buffers."""
        if kwargs:
            ref = self._ref
            for v in kwargs.values():
                if (type(v) is Tagged and v.owner is ref) or \
                        (type(v) in (list, tuple) and self._carries(v)):  # range=(lo, hi)
                    return self._direct(fn, args, kwargs)
            out = kwargs.get("out")
            if out is not None and (self.versions or any(map(self._carries, args))
                                    or any(map(self._holds, _outs(out)))):
                return True
        if self.versions:
            for a in args:
                if type(a) is np.ndarray and self._array_node(a, None) is not None:
                    return self._direct(fn, args, kwargs)
        if self._ref is None:
            return False
        if fn is operator.getitem or fn is operator.contains:
            return False
        if _rules._STANDINS and _rules.standin(fn, _rules.vjp_rules) is not None:
            return True  # a library function restated for differentiation (SciPy's solvers)
        if _callbacks.has_callback(args, kwargs) and _callbacks.c_callee(fn) and \
                _rules.vjp_rules(fn) is None and not can_recurse(self, fn, *args, **kwargs):
            return True  # C code that calls back into Python: see _callbacks.call_guarded
        if fn is operator.setitem:
            container = args[0]
            if type(container) in (list, dict):
                return self._carries(args[2])
            if isinstance(container, np.ndarray):
                return self._carries(args[2]) or self._holds(container)
            if type(container) is np.flatiter:
                return self._carries(args[2]) or (
                    bool(self.versions) and self._array_node(container.base, None) is not None)
            return False
        if fn is setattr:
            return self._carries(args[2]) and not isinstance(args[2], (Tagged,))
        if self.tape:
            target = _written_array(fn, args, kwargs)
            if target is not None and self._holds(target):
                return True
        containers = [a for a in args if type(a) in (list, tuple, dict)]
        if id(fn) in CONSUMERS and any(map(python_iterable, args)):
            return True  # math.fsum(bag): the bag is iterated through the context
        if not containers:
            # an iterator consumed by a C function (math.fsum(x * k for k in ks)): its items
            # may be differentiated values, which the function would read natively
            return any(map(_is_iterator, args)) and not carries_tags(fn) and \
                id(fn) not in _ITERATORS and not isinstance(fn, _PYTHON_CODE) and \
                not can_recurse(self, fn, *args, **kwargs)
        if type(fn) is _BuiltinMethod and type(fn.__self__) in (list, dict):
            return fn.__name__ in _STORES and any(map(self._carries, containers))
        if id(fn) in _MOVING:
            return any(map(self._carries, containers))
        if id(fn) in _ITERATORS or fn in (operator.add, operator.iadd, operator.mul,
                                          operator.imul, operator.concat):
            if fn is operator.iadd and type(args[0]) is list:  # L += [v]: stored as it is
                return self._carries(args[1])
            if fn is not operator.concat and any(isinstance(a, (np.ndarray, np.generic))
                                                 for a in args):
                # np.ones(3) + [s]: NumPy reads the list as an array (list concatenation and
                # repetition are for lists alone)
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

    # -- recording -----------------------------------------------------------------------------
    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        p: Any  # the local partial derivatives on the fast paths: a pair, or one
        if type(fn) is types.FunctionType:
            found = self._specs.get(id(fn))
            if found is not None and found[0] is fn:
                try:
                    return found[1](self, *args, **kwargs)
                except TypeError as exc:
                    if exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
                        _binding_error(fn, args, kwargs)  # raised by the call: say it as fn
                    raise
        if fn is operator.getitem and len(args) == 2 and isinstance(args[0], dict) and \
                type(args[1]) is Tagged and args[1].owner is self._ref:
            return by_differentiated_key(self.fallback(fn, *args), self._carries, "reverse")
        keyed = keyed_read(fn, args) if type(fn) is not types.FunctionType else None
        if keyed is not None and type(keyed[1]) is Tagged and keyed[1].owner is self._ref:
            return by_differentiated_key(self.fallback(fn, *args, **kwargs), self._carries,
                                         "reverse")
        if not self.nested and not kwargs and not (
                args and type(args[0]) is Tagged and type(args[0].value) is np.ndarray
                and fn is not operator.getitem):  # (array code: none of these paths is its)
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
                    # float arithmetic with no enclosing context: the local partials recorded
                    ref = self._ref
                    a, b = args
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
                        if partials is _MUL:
                            out, p = fn(va, vb), (vb, va)
                        elif partials is _ADD:
                            out, p = fn(va, vb), _ONES
                        elif partials is _SUB:
                            out, p = fn(va, vb), _ONE_MINUS_ONE
                        else:
                            try:
                                out = fn(va, vb)
                            except ZeroDivisionError:
                                out = None
                            p = None if out is None or type(out) not in _REAL_TYPES else \
                                partials(va, vb, out, na is not None, nb is not None)
                        if p is not None and not self.second:
                            node = len(self.tape)
                            self.tape.append((node, na, p[0], nb, p[1]))
                            return Tagged(out, node, ref, self._label)
            elif len(args) == 1:
                partial = _FAST1.get(id(fn))
                if partial is not None:
                    a = args[0]
                    if type(a) in _REAL_TYPES:
                        return fn(a)
                    if type(a) is Tagged and a.owner is self._ref and \
                            type(a.value) in _REAL_TYPES:
                        va = a.value
                        out = fn(va)
                        p = partial(va, out) if type(out) in _REAL_TYPES else None
                        if p is not None and not self.second:
                            node = len(self.tape)
                            self.tape.append((node, a.meta, p))
                            return Tagged(out, node, self._ref, self._label)
            if fn is operator.getitem:
                container, index = args
                if type(container) in _NATIVE_CONTAINERS:
                    if type(container) is dict and keeps_heap_metadata(self):
                        return self.fallback(fn, container, index)  # (vars(obj)[name])
                    return container[index]
                if type(container) is Tagged and container.owner is self._ref and \
                        (type(index) is int or (type(index) is tuple and
                                                all(type(i) is int for i in index))):
                    array = container.value
                    if type(array) is np.ndarray:
                        out = array[index]
                        if type(out) is np.float64:  # x[i] of a float array, in a loop
                            node = len(self.tape)
                            self.tape.append((node, self._node(container), index,
                                              _placeholder(array)))
                            return Tagged(out, node, self._ref, self._label)
        if not self.nested and not self.versions:
            plan = _PLANS.get(id(fn))
            if plan is None or plan.fn is not fn or plan.version != _rules.version:
                plan = _plan(fn)
            if plan.simple:
                out = self._simple_call(fn, plan, args, kwargs)
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
        if fn is getattr:
            return self._attribute(*args)
        if fn is operator.setitem or fn is operator.delitem:
            return self._setitem(fn, *args)
        method = _rules.method_with_rules(fn, _rules.vjp_rules)
        if method is not None:  # a.dot(y) is np.ndarray.dot(a, y), as Python runs it
            return self.execute(method[0], method[1], *args, **kwargs)
        replacement = _replacement(fn)
        if replacement is not None:
            return recurse(self, replacement, *args, **kwargs)
        if fn is setattr:
            return self._setattr(*args)
        if id(fn) in _ITERATORS:
            return self._iterate(fn, args, kwargs)
        if type(fn) is _BuiltinMethod and type(fn.__self__) in (list, dict):
            return self._store(fn, args, kwargs)
        if id(fn) in _MOVING:
            for a in args:
                if type(a) is list:
                    self._note_store(a)
            return fn(*args, **kwargs)
        if fn is dict:  # dict(a=v): the values stored as they are
            out = fn(*args, **kwargs)
            self._note_store(out)
            return out
        if id(fn) in CONSUMERS:
            args = tuple(list(iterate_through(self, a)) if python_iterable(a) else a
                         for a in args)
        if any(map(_is_iterator, args)):
            return self._consume(_public(fn), args, kwargs)
        if fn in _INPLACE:
            target = _innermost(args[0])
            if isinstance(target, np.ndarray):
                return self._write_inplace(fn, *args)
            if type(target) is list and fn is operator.iadd:
                other = _innermost(args[1])
                if isinstance(other, (np.ndarray, np.generic)) or _arrays.is_foreign_array(other):
                    return self.execute(operator.add, *args)  # NumPy's __radd__ answers first
                self._note_store(target)  # L += [v]: extended, the values stored as they are
                target += args[1]
                return target
            if _arrays.is_foreign_array(target):
                raise _arrays.write_error(target, "reverse")
        if fn is np.copyto:
            return self._copyto(*args, **kwargs)
        if kwargs.get("out") is not None:
            return self._write_out(fn, args, kwargs)
        fn = _public(fn)
        implementation = _implementation(fn)
        if implementation is not None:
            return recurse(self, implementation, *args, **kwargs)
        return self._call(fn, args, kwargs)

    def _read(self, container: Tagged, index: int) -> Any:
        """``x[i]`` of a differentiated array, for specialised code: a scalar read of a float
        array recorded as in ``execute``, anything else through the context."""
        array = container.value
        if container.owner is self._ref and type(array) is np.ndarray:
            out = array[index]
            if type(out) is np.float64:
                node = len(self.tape)
                self.tape.append((node, self._node(container), index, _placeholder(array)))
                return Tagged(out, node, self._ref, self._label)
        if self.is_primitive(operator.getitem, container, index):
            return self.execute(operator.getitem, container, index)
        return overdub(self, operator.getitem, container, index)

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` on plain values: through the enclosing context if there is one."""
        if self.nested:
            return self.fallback(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    def _plain(self, x: Any) -> Any:
        if type(x) is Tagged:
            return x.value if x.owner is self._ref else x
        if type(x) in (list, tuple) and x:
            return type(x)([self._plain(v) for v in x])
        return x

    def _inputs(self, x: Any) -> Any:
        if type(x) in (list, tuple) and x:
            nodes = [self._inputs(v) for v in x]
            return nodes if any(n is not None for n in nodes) else None
        return self._node(x)

    def _call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A primitive call: run on plain values, record an entry with the argument nodes."""
        if type(fn) is custom_jvp:
            return self._through_jvp_rule(fn, args, kwargs)
        if kwargs and any(self._carries(v) for v in kwargs.values()):
            args, kwargs = _positional(fn, args, kwargs)
            if any(self._carries(v) for v in kwargs.values()):
                name = next(k for k, v in kwargs.items() if self._carries(v))
                raise _rules.MissingRuleError(
                    f"no reverse-mode derivative rule for {_callbacks.describe(fn)} with "
                    f"respect to its keyword argument {name!r} under {type(self).__name__}; "
                    f"pass it positionally or register a rule with overdub_ad.defvjp")
        primals = [self._plain(a) for a in args]
        inputs = [self._inputs(a) for a in args]
        if any(type(n) is list for n in inputs) and takes_arrays(fn, primals):
            # a list of numbers is an array to NumPy: to its rule too (see _arraylike)
            primals = [self._run(np.asarray, p) if type(n) is list and array_like(p)
                       and stackable(p) else p for p, n in zip(primals, inputs)]
        plain_kwargs = {k: self._plain(v) for k, v in kwargs.items()} if kwargs else kwargs
        if isinstance(fn, custom_vjp):
            if fn.fwd is None:
                return recurse(self, fn.fn, *args, **kwargs)
            if self._closes_over(fn.fn):
                if getattr(fn, "_wants_inputs", False):  # checkpoint: differentiated through,
                    return recurse(self, fn.fn, *args, **kwargs)  # nothing recomputed
                raise _rules.MissingRuleError(
                    f"custom_vjp function {_rules._name(fn.fn)} reads a differentiated value "
                    f"from its closure or defaults, which its vjp rule gives no cotangent for: "
                    f"pass that value as an argument")
            out, residuals = self._run(fn.fwd, *primals, **plain_kwargs)
            bwd = fn.bwd
            assert bwd is not None  # defvjp sets fwd and bwd together
            if getattr(fn, "_wants_inputs", False):  # checkpoint: only what is needed
                wanted = tuple([i for i, n in enumerate(inputs) if n is not None])
                joint = lambda ct: bwd(residuals, ct, wanted)  # noqa: E731
            else:
                joint = lambda ct: bwd(residuals, ct)  # noqa: E731
            return self._record(fn, primals, plain_kwargs, out, inputs, joint=joint)
        if _rules.is_nondifferentiable(fn) or all(n is None for n in inputs):
            return self._run(fn, *primals, **plain_kwargs)
        rules = _rules.vjp_rules(fn)
        for i, node in enumerate(inputs):
            if node is not None and (rules is None or i >= len(rules) or rules[i] is None):
                out = self._run(fn, *primals, **plain_kwargs)
                if _no_derivative_lost(out, all(type(n) is list for n in inputs
                                                if n is not None)):
                    return out  # (text, a sort key's string): nothing lost, as forward mode
                raise _rules.missing(fn, i, "reverse", type(self).__name__)
        out = self._run(fn, *primals, **plain_kwargs)
        return self._record(fn, primals, plain_kwargs, out, inputs,
                            shape_only=fn is operator.getitem or fn is _NP_UNSTACK)

    def _through_jvp_rule(self, fn: custom_jvp, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
        """A :class:`custom_jvp` function, differentiated by its rule as JAX does.  The rule's
        tangent map is linear: it is recorded with the primals plain here and each
        differentiated argument's tangent standing for the argument itself (``x - x``, zero in
        value, with ``x``'s node), and added to the rule's output.  The cotangents are then
        the transposed map's; an enclosing derivative sees the map's coefficients depend on
        the primals."""
        leaves, tree = flatten(list(fn.positional(args, kwargs)))
        primals = [self._plain(leaf) for leaf in leaves]
        tangents = [_zero(p, ()) if self._node(leaf) is None else
                    self.execute(operator.sub, leaf, p) for leaf, p in zip(leaves, primals)]
        result = self.overdub(fn.jvp, tuple(unflatten(tree, primals)),
                              tuple(unflatten(tree, tangents)))
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"the jvp rule of {_rules._name(fn.fun)} must return a pair "
                            f"(primal_out, tangent_out), got {type(result).__name__}")
        if self.second:
            self.tape.append(_LINEARISED)
        outs, out_tree = flatten(result[0])
        douts, dout_tree = flatten(result[1])
        if len(outs) != len(douts):
            raise TypeError(f"the jvp rule of {_rules._name(fn.fun)} returned a tangent of "
                            f"structure {dout_tree} for an output of structure {out_tree}")
        return unflatten(out_tree, [o if self._node(d) is None else
                                    self.execute(operator.add, self._plain(o), d)
                                    for o, d in zip(outs, douts)])

    def _simple_call(self, fn: Any, plan: _Plan, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
        """What :meth:`_call` does for the common call -- a function with rules, on arrays
        and numbers, no enclosing context, no array versioned yet -- without its generality
        (containers of differentiated values, keywords that carry them, ``out=``), from
        ``fn``'s plan.  ``_NOT_SIMPLE`` for any other call, before anything ran."""
        ref = self._ref
        primals = list(args)
        inputs: list[Any] = [None] * len(primals)
        mask = 0  # bit i: argument i is differentiated
        i = 0
        for a in args:
            kind = type(a)
            if kind is Tagged:
                value = a.value
                if a.owner is not ref or type(value) not in _SIMPLE_VALUES:
                    return _NOT_SIMPLE
                primals[i] = value
                inputs[i] = a.meta
                mask |= 1 << i
            elif kind not in _SIMPLE_ARGS and not (kind is tuple and _plain_tuple(a)):
                return _NOT_SIMPLE
            i += 1
        if kwargs:
            if "out" in kwargs:
                return _NOT_SIMPLE
            for v in kwargs.values():
                if not (type(v) in _SIMPLE_ARGS or (type(v) is tuple and _plain_tuple(v))):
                    return _NOT_SIMPLE
        if not mask or plan.nondifferentiable:
            return fn(*primals, **kwargs)
        how = plan.masks.get(mask)
        if how is None:
            how = plan.recording(mask)
        unread = how[0]
        if unread is None:
            return _NOT_SIMPLE  # MissingRuleError, from _call
        rules = plan.rules
        out = fn(*primals, **kwargs) if kwargs else fn(*primals)
        kind = type(out)
        if (kind is np.ndarray and out.base is None and out.dtype.kind in "fc"
                and fn is not operator.getitem) or kind is float or kind is np.float64:
            node = _Node()
            kept = out
            # values no rule of a differentiated argument reads are not kept: they are freed
            # as in the plain run (memory, and time: the allocator reuses them)
            if not self.second:
                for i in unread:
                    primals[i] = _placeholder(primals[i])
                if how[1]:
                    kept = _placeholder(out)
            quick = plan.quick
            if quick is not None and (quick[4] or not self.second) and \
                    quick[2](mask, primals, kwargs):
                rules = quick[3]  # x ** 2, a @ b, np.sum(a): the same numbers, faster
            entry = _Entry(fn, primals, kwargs, kept, inputs, node, None, rules)
            self.tape.append(entry)
            if self.tracking:  # (a plain array the tape holds was written in place)
                self._hold(entry, primals, kept)
            return Tagged(out, node, ref, self._label)
        if fn is operator.getitem and kind is np.ndarray and out.dtype.kind in "fc":
            # x[1:]: _record's work for a view of x, where x owns its data (x's node is the
            # one a write into the view updates) or is itself a view (nothing to note)
            x = primals[0]
            if out.base is x and type(inputs[0]) is _Node and id(x) not in self.roots:
                self.roots[id(x)] = (weakref.ref(x), inputs[0])
            node = _Node()
            primals[0] = _placeholder(x)
            entry = _Entry(fn, primals, kwargs, out, inputs, node, None, rules)
            self.tape.append(entry)
            if self.tracking:
                self._hold(entry, primals, out)
            return Tagged(out, node, ref, self._label)
        return self._record(fn, primals, kwargs, out, inputs,
                            shape_only=fn is operator.getitem or fn is _NP_UNSTACK)

    def _record(self, fn: Any, primals: list[Any], kwargs: dict[str, Any], out: Any,
                inputs: list[Any], joint: Callable[..., Any] | None = None,
                shape_only: bool = False) -> Any:
        outputs: tuple[_Node | None, ...] | _Node
        result: Any
        if isinstance(out, (tuple, list)):
            outputs = tuple([_Node() if _is_differentiable(o) else None for o in out])
            if all(n is None for n in outputs):
                return out
            items = [o if n is None else self._wrap(o, n) for o, n in zip(out, outputs)]
            result = type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
        elif _is_differentiable(out) or (type(_innermost(out)) is int
                                         and _carries_int(fn, inputs, joint)):
            outputs = _Node()
            result = self._wrap(out, outputs)
        else:
            if isinstance(out, np.ndarray) and out.dtype == object:
                raise _rules.MissingRuleError(
                    f"{_rules._name(fn)} turned a differentiated value into an object array "
                    f"under {type(self).__name__}: its elements would lose their derivatives "
                    f"(np.vectorize and object arrays are not differentiable)")
            return out
        self._note_views(primals, inputs, out, outputs)
        if shape_only:  # the rule needs only the first argument's shape and dtype
            primals[0] = _placeholder(primals[0])
        entry = _Entry(fn, primals, kwargs, out, inputs, outputs, joint)
        self.tape.append(entry)
        if self.tracking:
            self._hold(entry, primals, out)
        return result

    # -- values the tape needs, and views ------------------------------------------------------
    def _hold(self, entry: _Entry, primals: list[Any], out: Any) -> None:
        held = self.held
        for i, value in enumerate(primals):
            v = _innermost(value)
            if type(v) is np.ndarray:
                held.setdefault(id(_root(v)), []).append((v, entry, (i,)))
            elif type(value) in (list, tuple):
                for j, item in enumerate(value):
                    w = _innermost(item)
                    if type(w) is np.ndarray:
                        held.setdefault(id(_root(w)), []).append((w, entry, (i, j)))
        if isinstance(out, (tuple, list)):
            for j, item in enumerate(out):
                w = _innermost(item)
                if type(w) is np.ndarray:
                    held.setdefault(id(_root(w)), []).append((w, entry, ("out", j)))
        else:
            w = _innermost(out)
            if type(w) is np.ndarray:
                held.setdefault(id(_root(w)), []).append((w, entry, ("out",)))

    def _track(self) -> None:
        """Start keeping ``held``: first the arrays the entries recorded so far hold."""
        self.tracking = True
        for entry in self.tape:
            if type(entry) is _Entry:
                self._hold(entry, entry.primals, entry.out)

    def _save_before_write(self, array: np.ndarray) -> None:
        """Entries that read ``array`` (or memory it shares) keep the values they read."""
        if not self.tracking:
            self._track()
        key = id(_root(array))
        slot = self.held.get(key)
        if not slot:
            return
        keep: list[Any] = []
        copies: dict[int, Any] = {}
        for value, entry, path in slot:
            if value is array or np.may_share_memory(value, array):
                saved = copies.get(id(value))
                if saved is None:
                    if self.nested:  # the enclosing context keeps the copy's derivative
                        saved = self._run(np.copy, _stored(entry, path))
                    else:
                        saved = value.copy()
                    copies[id(value)] = saved
                _replace(entry, path, value, saved)
            else:
                keep.append((value, entry, path))
        if keep:
            self.held[key] = keep
        else:
            del self.held[key]

    def _note_views(self, primals: list[Any], inputs: list[Any], out: Any, outputs: Any) -> None:
        """A view of a differentiated array: remember that array's node (a write into the view
        updates it) and the write generation the view belongs to."""
        pairs = zip(out, outputs) if isinstance(out, (tuple, list)) else ((out, outputs),)
        for o, node in pairs:
            o = _innermost(o)
            if type(o) is not np.ndarray or not isinstance(o.base, np.ndarray) or node is None:
                continue
            root = _root(o)
            for p, n in zip(primals, inputs):
                p = _innermost(p)
                if p is root and type(n) is _Node and id(root) not in self.roots:
                    self.roots[id(root)] = (weakref.ref(root), n)
            rslot = self.versions.get(id(root))
            if rslot is not None and rslot[0]() is root:
                node.gen = rslot[2]

    def _root_node(self, root: np.ndarray) -> Any:
        node = self._array_node(root, None)
        if node is None:
            slot = self.roots.get(id(root))
            if slot is not None and slot[0]() is root:
                node = slot[1]
        return node

    def _holds(self, array: np.ndarray) -> bool:
        """Whether tape entries hold values in ``array``'s memory: then a write into it, even
        of constants into an array that is not differentiated (a scratch buffer refilled),
        is recorded like any other, so that they keep the values they read."""
        if not self.tape:
            return False
        if not self.tracking:
            self._track()
        return id(_root(array)) in self.held

    def _commit(self, array: np.ndarray, node: Any) -> None:
        """``array`` now holds the value of ``node`` (None: a constant); if it is a view, the
        array it views gets a new version too."""
        root = _root(array)
        if node is None and self._root_node(root) is None:
            slot = self.versions.get(id(root))
            if slot is None or slot[0]() is not root:
                return  # a constant written into a plain array: it stays plain
        if root is array:
            self._bump(root, node)
            return
        old = self._root_node(root)
        index = _element_index(array, root)
        if index is None:
            raise NotImplementedError(
                f"overdub_ad reverse mode: an in-place write into a view of dtype {array.dtype} "
                f"of an array of dtype {root.dtype} is not supported")
        new = None
        if old is not None or node is not None:
            new = _Node()
            self.tape.append(_Entry(_write, [_placeholder(root), index, _placeholder(array)], {},
                                    None, [old, None, node], new))
        gen = self._bump(root, new)
        self._set_slot(array, node, gen)

    def _bump(self, root: np.ndarray, node: Any) -> int:
        slot = self.versions.get(id(root))
        gen = slot[2] + 1 if slot is not None and slot[0]() is root else 1
        self._set_slot(root, node, gen)
        return gen

    # -- writes --------------------------------------------------------------------------------
    def _setitem(self, fn: Any, container: Any, index: Any, *value: Any) -> Any:
        target = _innermost(container)
        if type(target) in (list, dict) or _dict_storing(target):
            # stored as it is, so that native iteration keeps the derivative
            self._note_store(target)
            if type(index) is slice and value and self._differentiated_array(value[0]):
                value = (self._elements(value[0]),)  # lst[i:j] = a: a's elements, each
            key = self._plain(index)
            if type(key) is Tagged and self.nested:  # a key an enclosing context tagged: it
                # stores the key plain (and the value as it is), as it does for its stores
                return self.fallback(fn, target, key, *value)
            return fn(target, key, *value)
        if type(target) is np.flatiter:  # a.flat[i] = v
            array = target.base
            index = np.unravel_index(np.arange(array.size)[self._plain(index)], array.shape)
            return self._write_item(array, index, value[0])
        if _arrays.is_foreign_array(target):
            raise _arrays.write_error(target, "reverse")
        if not isinstance(target, np.ndarray):
            raise _rules.missing(getattr(type(target), "__setitem__", fn), 0, "reverse",
                                 type(self).__name__)
        if fn is operator.delitem:
            return self._run(fn, untag(container, self), index)
        return self._write_item(container, self._plain(index), value[0])

    def _write_item(self, container: Any, index: Any, value: Any) -> None:
        """``a[index] = value`` on an array: a functional update on the tape, in place."""
        array = _innermost(container)
        if _arrays.is_foreign_array(array):  # an out= buffer
            raise _arrays.write_error(array, "reverse")
        if type(value) in (list, tuple) and self._carries(value):
            value = self._call(np.array, (value,), {})
        old = self._node(container)
        value_node = self._node(value)
        plain_value = self._plain(value)
        self._save_before_write(array)
        self._run(operator.setitem, untag(container, self), index, plain_value)
        node = None
        if old is not None or value_node is not None:
            node = _Node()
            self.tape.append(_Entry(_write, [_placeholder(array), index,
                                             _placeholder(plain_value)], {}, None,
                                    [old, None, value_node], node))
        self._commit(array, node)

    def _write_inplace(self, fn: Any, target: Any, other: Any) -> Any:
        """``a += b`` on an array: recorded as ``a = a + b``, the array object kept."""
        array = _innermost(target)
        inputs = [self._node(target), self._inputs(other)]
        plain_other = self._plain(other)
        target_p = untag(target, self)
        pure = _INPLACE[fn]
        self._save_before_write(array)
        other_array = _innermost(plain_other)
        if fn in _READS_TARGET and type(other_array) is np.ndarray and \
                np.may_share_memory(other_array, array):
            # y *= y, y *= y[::-1]: the rules read the operand as it was before the write
            plain_other = self._run(np.copy, plain_other) if self.nested else other_array.copy()
        if self.nested:
            # functionally, through the enclosing context (which sees the new values), then
            # copied into the array
            before = self._run(np.copy, target_p) if fn in _READS_TARGET else \
                _placeholder(array)
            new = self._run(pure, target_p, plain_other)
            self._run(operator.setitem, target_p, Ellipsis, new)
        else:
            before = array.copy() if fn in _READS_TARGET else _placeholder(array)
            fn(array, plain_other)
            new = array
        node = None
        if inputs[0] is not None or inputs[1] is not None:
            node = _Node()
            entry = _Entry(pure, [before, plain_other], {}, new, inputs, node)
            self.tape.append(entry)
            self._hold(entry, [None, plain_other], new)
        self._commit(array, node)
        return target

    def _write_out(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``np.add(a, b, out=c)``: ``c`` gets the new value (and node); recorded without out."""
        out = kwargs["out"]
        targets = out if isinstance(out, tuple) else (out,)
        rest = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
        where = kwargs.get("where", True)
        result = self.execute(fn, *args, **rest)
        results = result if isinstance(result, tuple) and len(targets) > 1 else (result,)
        for target, value in zip(targets, results):
            if target is None:
                continue
            if where is not True:
                value = self._call(np.where, (where, value, target), {})
            self._write_item(target, Ellipsis, value)
        return targets[0] if len(targets) == 1 else out

    def _copyto(self, dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
        if where is not True:
            src = self._call(np.where, (where, src, dst), {})
        self._write_item(dst, Ellipsis, src)

    # -- containers ----------------------------------------------------------------------------
    def _store(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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

    def _setattr(self, obj: Any, name: str, value: Any) -> None:
        self.stores[(id(obj), name)] = (obj, name)
        return setattr(_innermost(obj), name, value)

    def _note_store(self, container: Any) -> None:
        stores = self.stores
        stores[(id(container), None)] = (container, None)
        if len(stores) > self._store_limit:  # forget containers nobody else holds any more
            for key in [k for k, (c, name) in stores.items() if sys.getrefcount(c) <= 3]:
                del stores[key]
            self._store_limit = max(256, 2 * len(stores))

    def _release_stores(self) -> None:
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

    def _cleaned(self, value: Any, depth: int = 0) -> Any:
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

    def _consume(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Iterator arguments of a C function: a list for a rule of a builtin or ``math``
        function that consumes them (``math.fsum``, ``sum``, ``max``); for any other function an
        iterator that raises :class:`MissingRuleError` at the first differentiated item."""
        if _rules.vjp_rules(fn) is not None and \
                getattr(fn, "__module__", None) in ("builtins", "math", "cmath"):
            args = tuple([list(a) if _is_iterator(a) else a for a in args])
            return self._call(fn, args, kwargs)
        return self._run(fn, *[self._guard(fn, a) if _is_iterator(a) else a for a in args],
                         **kwargs)

    def _guard(self, fn: Any, iterator: Any) -> Any:
        for item in iterator:
            if self._carries(item):
                raise _rules.missing(fn, 0, "reverse", type(self).__name__)
            yield item

    def _iterate(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
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

    def _differentiated_array(self, x: Any) -> bool:
        plain = _innermost(x)
        return isinstance(plain, np.ndarray) and plain.ndim > 0 and self._node(x) is not None

    def _elements(self, x: Any) -> list[Any]:
        if np.ndim(_innermost(x)) == 0:
            raise TypeError("iteration over a 0-d array")
        if _NP_UNSTACK is not None:
            return list(self._call(_NP_UNSTACK, (x,), {}))
        return [self._call(operator.getitem, (x, i), {}) for i in range(len(_innermost(x)))]

    # -- attributes ----------------------------------------------------------------------------
    def _attribute(self, obj: Any, name: Any, *default: Any) -> Any:
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


# A tape for _hvp (ReverseContext.second) on which a custom_jvp rule ran: its tangent map was
# recorded with primals that tape holds as constants, so _hvp's passes, which differentiate the
# tape, would miss how the map depends on them.  This entry (not one they take) makes them
# decline; the nested route differentiates the rule instead.
_LINEARISED = ("custom_jvp",)


def _cell_values(fn: types.FunctionType) -> list[Any]:
    """The values in ``fn``'s closure cells (an empty one, a name not assigned yet, has none)."""
    values = []
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    return values


def _dict_storing(x: Any) -> bool:
    """A dict subclass that stores items as dict does (``defaultdict``, ``Counter``): a
    differentiated value is stored in it as it is, as in a dict."""
    return isinstance(x, dict) and getattr(type(x), "__setitem__", None) is dict.__setitem__


_INPLACE_IDS = frozenset(map(id, _INPLACE))
_ARRAY_MUTATORS = frozenset({"fill", "sort", "put"})  # the methods in _METHODS that write


def _written_array(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The plain array that a call with no differentiated argument writes into (``a += 1``,
    ``np.copyto(a, b)``, ``np.put(a, i, v)``, ``np.add.at(a, i, v)``, ``a.fill(0)``), or None."""
    if not (id(fn) in _INPLACE_IDS or fn is np.copyto or id(fn) in _REPLACEMENTS):
        if type(fn) is not _BuiltinMethod:
            return None
        owner = fn.__self__  # (np.copyto and operator.iadd are of this type too)
        if type(owner) is np.ndarray:
            return owner if fn.__name__ in _ARRAY_MUTATORS else None
        if not (isinstance(owner, np.ufunc) and fn.__name__ == "at"):
            return None
    return args[0] if args and type(args[0]) is np.ndarray else None


def _outs(out: Any) -> list[np.ndarray]:
    """The plain arrays of an ``out=`` argument."""
    return [o for o in (out if type(out) is tuple else (out,)) if type(o) is np.ndarray]


def _put_back(writes: list[tuple[Any, ...]]) -> None:
    """Run the ``(setattr or operator.setitem, container, key, value)`` writes: Python code,
    so that an enclosing context sees them."""
    for write, container, key, value in writes:
        write(container, key, value)


def _stored(entry: Any, path: tuple[Any, ...]) -> Any:
    """What ``entry`` holds at ``path`` (an enclosing context's tagged value, or an array)."""
    if path[0] == "out":
        return entry.out if len(path) == 1 else entry.out[path[1]]
    if len(path) == 1:
        return entry.primals[path[0]]
    return entry.primals[path[0]][path[1]]


def _replace(entry: Any, path: tuple[Any, ...], value: Any, saved: Any) -> None:
    if path[0] == "out":
        if len(path) == 1:
            if _innermost(entry.out) is value:
                entry.out = saved
        elif _innermost(entry.out[path[1]]) is value:
            out = list(entry.out)
            out[path[1]] = saved
            entry.out = type(entry.out)(*out) if hasattr(entry.out, "_fields") else \
                type(entry.out)(out)
    elif len(path) == 1:
        if _innermost(entry.primals[path[0]]) is value:
            entry.primals[path[0]] = saved
    else:
        items = entry.primals[path[0]]
        if _innermost(items[path[1]]) is value:
            items = list(items)
            items[path[1]] = saved
            entry.primals[path[0]] = type(entry.primals[path[0]])(items)


_DECISIONS: dict[int, tuple[Any, bool]] = {}
# Python functions known not to be primitives (the core recurses into them): fn -> (its code,
# the context class that found out)
_RECURSIVE: weakref.WeakKeyDictionary[Any, tuple[Any, type]] = weakref.WeakKeyDictionary()


def _reads_table() -> dict[int, tuple[Any, ...]]:
    """What the shipped reverse rules of common functions read, per argument: the positions
    of the primal arguments (-1 for the output) whose values rule ``i`` uses -- beyond shapes
    and dtypes, which a placeholder keeps.  ``id(fn) -> (fn, its shipped rules, reads)``;
    a rule registered later by the user is not in it (its identity differs), so its entries
    keep every value."""
    none: frozenset[int] = frozenset()
    x, y, out = frozenset({0}), frozenset({1}), frozenset({-1})
    table = {}
    for fns, reads in (((operator.add, np.add, operator.sub, np.subtract), (none, none)),
                       ((operator.neg, np.negative, operator.pos, np.positive, np.sum, np.mean),
                        (none,)),
                       ((operator.mul, np.multiply, operator.matmul, np.matmul), (y, x)),
                       ((operator.truediv, np.true_divide), (y, y | out)),
                       ((operator.pow, np.power), (x | y, x | y | out)),
                       ((np.tanh, np.exp, np.sqrt, np.tan, np.expm1, np.reciprocal, np.cbrt),
                        (out,)),
                       ((np.sin, np.cos, np.log, np.log1p, np.log2, np.log10, np.square,
                         np.arctan, np.sinh, np.cosh, np.arcsin, np.arccos, np.arcsinh,
                         np.arctanh), (x,))):
        for fn in fns:
            rules = _rules.vjp_rules(fn)
            if rules is not None:
                table[id(fn)] = (fn, rules, reads)
    return table

_NOT_SIMPLE = object()
_SIMPLE_VALUES = frozenset({np.ndarray, float, np.float64, complex, np.complex128})
_SIMPLE_ARGS = frozenset({np.ndarray, float, int, bool, complex, str, type(None), slice,
                          type(Ellipsis), type, np.float64, np.int64, np.intp, np.bool_})


class _Plan:
    """What the rule tables say about recording the calls of one function, looked up once and
    trusted while :data:`_rules.version` is still ``version`` (every registration bumps it).

    ``simple``: whether its calls may take :meth:`ReverseContext._simple_call` (a C function or
    ufunc with rules, or none needed, that none of ``execute``'s special cases handles);
    ``rules``, ``nondifferentiable``: its table entries; ``quick``: its entry in
    :data:`_QUICK`, if its rules are the shipped ones; ``masks``: per mask of differentiated
    arguments (bit ``i``: argument ``i``), the arguments whose values no rule reads -- None if
    one of them has no rule -- and whether no rule reads the output (see :meth:`recording`).
    """

    __slots__ = ("fn", "version", "simple", "rules", "nondifferentiable", "quick", "masks")

    def __init__(self, fn: Any, special: bool) -> None:
        self.fn = fn
        self.version = _rules.version
        self.rules = _rules.vjp_rules(fn)
        self.nondifferentiable = _rules.is_nondifferentiable(fn)
        quick = _QUICK.get(id(fn))
        self.quick = quick if quick is not None and quick[0] is fn and \
            quick[1] is self.rules else None
        self.masks: dict[int, tuple[Any, bool]] = {}
        self.simple = not special and (self.rules is not None or self.nondifferentiable)

    def recording(self, mask: int) -> tuple[Any, bool]:
        """How a call whose differentiated arguments are the bits of ``mask`` is recorded:
        the differentiated arguments whose values no rule reads (kept as placeholders; None if
        one of them has no rule), and whether no rule reads the output."""
        rules = self.rules
        positions = [i for i in range(mask.bit_length()) if mask >> i & 1]
        how: tuple[Any, bool]
        if rules is None or any(i >= len(rules) or rules[i] is None for i in positions):
            how = (None, False)
        else:
            reads = _READS.get(id(self.fn))
            if reads is not None and reads[0] is self.fn and reads[1] is rules:
                needed = frozenset().union(*[reads[2][i] for i in positions])
                how = (tuple([i for i in positions if i not in needed]), -1 not in needed)
            else:
                how = ((), False)
        self.masks[mask] = how
        return how


# id(fn) -> the plan of a C function or ufunc (Python code and bound methods get a fresh plan
# per call: a kept one would keep them alive, and they never take _simple_call anyway)
_PLANS: dict[int, _Plan] = {}


def _plan(fn: Any) -> _Plan:
    """``fn``'s plan, made from the rule tables as they are now (and kept, see _PLANS)."""
    bound = type(fn) is _BuiltinMethod and not isinstance(fn.__self__, types.ModuleType)
    special = (fn is getattr or fn is setattr or fn is operator.setitem or fn is dict
               or fn is operator.delitem or fn is np.copyto or id(fn) in _ITERATORS
               or id(fn) in _MOVING or isinstance(fn, custom_vjp) or bound
               or isinstance(fn, _PYTHON_CODE) or _replacement(fn) is not None
               or _public(fn) is not fn)
    try:
        special = special or fn in _INPLACE
    except TypeError:  # unhashable
        special = True
    # forcing another route re-plans every function (force_route changes the rule version)
    plan = _Plan(fn, special or not _routes.enabled("reverse-plans"))
    if not (isinstance(fn, _PYTHON_CODE) or bound) and len(_PLANS) < 100_000:
        _PLANS[id(fn)] = plan
    return plan


def _plain_tuple(t: tuple[Any, ...]) -> bool:
    """A tuple of plain numbers, indices and arrays (a shape, an index, axes)."""
    for item in t:
        if type(item) not in _SIMPLE_ARGS:
            return False
    return True


_OVERDUB_PACKAGES = frozenset(("overdub", "overdub_ad", "overdub_gpu"))


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


def _binding_error(fn: types.FunctionType, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> None:
    """Raise the TypeError ``fn(*args, **kwargs)`` raises natively if the arguments do not
    bind to its parameters: the specialised version's own message would count its hidden
    first parameter ("takes 2 positional arguments but 3 were given" for one too many)."""
    import inspect
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        try:
            fn(*args, **kwargs)  # fails to bind, as natively, before any of fn's code runs
        except TypeError as native:
            raise native.with_traceback(None) from None


def _remember(fn: Any, decision: bool) -> None:
    if not isinstance(fn, _PYTHON_CODE) and len(_DECISIONS) < 100_000:
        _DECISIONS[id(fn)] = (fn, decision)


def _positional(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Keyword arguments bound to their positions where ``fn``'s signature says so."""
    import inspect
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return args, kwargs
    items, named = list(args), dict(kwargs)
    for i, p in enumerate(params):
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        if i < len(items):
            continue
        if p.name in named:
            items.append(named.pop(p.name))
        elif p.default is not p.empty and any(q.name in named for q in params[i + 1:]):
            items.append(p.default)
        else:
            break
    return tuple(items), named


_NP_UNSTACK = getattr(np, "unstack", None)
_READS = _reads_table()


def _pow_constant_vjp(ct: Any, out: Any, /, x: Any, y: Any, *m: Any) -> Any:
    """The cotangent of ``x`` in ``x ** y`` for a constant number ``y != 0``: what the shipped
    rules compute, ``ct * (y * x ** (y - 1))`` (their guard for ``x == y == 0`` never applies),
    without their masks; ``x ** 1`` is ``x`` exactly.  Below 1 the slope at ``x == 0`` is
    infinite, as the shipped rules give it (without NumPy's warning)."""
    if y < 1:
        with np.errstate(divide="ignore"):
            return ct * (y * np.power(x, y - 1))
    return ct * (y * (x if y == 2 else np.power(x, y - 1)))


def _matmul_matrices_vjp_x(ct: Any, out: Any, /, x: Any, y: Any) -> Any:
    """The cotangent of the matrix ``x`` in ``x @ y`` for a matrix ``y``: the shipped rule's
    ``np.matmul(ct, np.swapaxes(y, -1, -2))``, without its cases for vectors and stacks."""
    return np.matmul(ct, y.T)


def _matmul_matrices_vjp_y(ct: Any, out: Any, /, x: Any, y: Any) -> Any:
    return np.matmul(x.T, ct)


def _sum_all_vjp(ct: Any, out: Any, /, x: Any) -> Any:
    """The cotangent of the array ``x`` in ``np.sum(x)``: the shipped rule's read-only
    broadcast of ``ct`` to ``x``'s shape, made directly (``np.broadcast_to`` and the rule's
    handling of axes and masks cost several times the gradient of a small array)."""
    ct = np.asarray(ct)
    view = np.ndarray(x.shape, ct.dtype, ct, 0, (0,) * x.ndim)
    view.flags.writeable = False
    return view


_POW_CONSTANT = (_pow_constant_vjp, _rules.ZERO)
_CONSTANT_POWERS = frozenset({int, float})


def _constant_power(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """``x ** y`` for a constant number ``y != 0``, only ``x`` differentiated."""
    return mask == 1 and len(primals) == 2 and not kwargs and \
        type(primals[1]) in _CONSTANT_POWERS and primals[1] != 0


def _matrices(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """Two NumPy matrices, nothing else."""
    return not kwargs and len(primals) == 2 and \
        type(primals[0]) is np.ndarray and primals[0].ndim == 2 and \
        type(primals[1]) is np.ndarray and primals[1].ndim == 2


def _whole_array(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """One NumPy array, nothing else (the reduction of all of it)."""
    return not kwargs and len(primals) == 1 and type(primals[0]) is np.ndarray


def _quick_table() -> dict[int, tuple[Any, ...]]:
    """Faster equivalents of shipped reverse rules, for their commonest calls: the same
    numbers, fewer operations.  ``id(fn) -> (fn, its shipped rules, the test of a call
    (mask of differentiated arguments, primal arguments, keywords), the rules to record
    instead, whether second-order tapes may record them too)`` -- :mod:`._hvp` knows
    :data:`_POW_CONSTANT`, not the others.  A rule the user registered later is not in it (its
    identity differs)."""
    table = {}
    for fns, test, quick, second in (
            ((operator.pow, np.power), _constant_power, _POW_CONSTANT, True),
            ((operator.matmul, np.matmul), _matrices,
             (_matmul_matrices_vjp_x, _matmul_matrices_vjp_y), False),
            ((np.sum,), _whole_array, (_sum_all_vjp,), False)):
        for fn in fns:
            rules = _rules.vjp_rules(fn)
            if rules is not None:
                table[id(fn)] = (fn, rules, test, quick, second)
    return table


_QUICK = _quick_table()


class _Unsupported:
    """A method of a differentiated array with no derivative: calling it is an error."""

    def __init__(self, method: Any) -> None:
        self.method = method

    @opaque
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _rules.missing(self.method, 0, "reverse", "ReverseContext")


# -- methods and attributes of differentiated arrays -------------------------------------------

def _matrix_transpose(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


_ATTRIBUTES = {"real": np.real, "imag": np.imag, "T": np.transpose, "mT": _matrix_transpose}


def _m_reshape(x: Any, *shape: Any, **kwargs: Any) -> Any:
    return np.reshape(x, shape[0] if len(shape) == 1 else shape, **kwargs)


def _m_transpose(x: Any, *axes: Any) -> Any:
    return np.transpose(x, axes[0] if len(axes) == 1 else (axes if axes else None))


def _m_flatten(x: Any, order: _Order = "C") -> Any:
    return np.copy(np.ravel(x, order))


def _m_copy(x: Any, order: _Order = "C") -> Any:
    return np.copy(x, order=order)


def _m_astype(x: Any, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
              copy: bool = True) -> Any:
    return np.astype(x, dtype, copy=copy)


def _m_item(x: Any, *args: Any) -> Any:
    if not args:
        v = np.reshape(x, ())
    elif len(args) == 1 and not isinstance(args[0], tuple):
        v = np.ravel(x)[args[0]]
    else:
        v = x[args[0] if len(args) == 1 else args]
    kind = np.result_type(v).kind
    if kind == "c":
        return complex(v)
    if kind == "f":
        return float(v)
    return np.asarray(v).item()


def _m_tolist(x: Any) -> Any:
    if np.ndim(x) == 0:
        return _m_item(x)
    return [_m_tolist(x[i]) for i in range(len(x))]


def _m_fill(x: Any, value: Any) -> None:
    x[...] = value


def _m_sort(x: Any, axis: int = -1, kind: Any = None, order: Any = None) -> None:
    x[...] = np.sort(x, axis=axis, kind=kind)


def _m_compress(x: Any, condition: Any, axis: Any = None) -> Any:
    return np.compress(condition, x, axis=axis)


def _m_array_wrap(x: Any, array: Any, context: Any = None, return_scalar: bool = False) -> Any:
    """``x.__array_wrap__(array)`` for a base ndarray ``x`` (NumPy's linalg wraps results so):
    ``array`` itself."""
    return array[()] if return_scalar and np.ndim(array) == 0 else array


def _m_view(x: Any, dtype: Any = None, type: Any = None) -> Any:
    if (dtype is None or np.dtype(dtype) == np.result_type(x)) and type is None:
        return x[...]
    raise _rules.MissingRuleError("no reverse-mode derivative for ndarray.view with another "
                                  "dtype or type")


def _cycled(values: Any, n: Any, positions: Any = None) -> Any:
    """``values`` repeated cyclically to ``n`` items (at ``positions``), as NumPy's put does."""
    flat = np.ravel(values)
    where = np.arange(n) if positions is None else positions
    return np.take(flat, where % np.size(flat))


def _put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    ind = np.ravel(np.asarray(ind))
    n = np.size(a)
    if mode == "clip":
        ind = np.clip(ind, 0, n - 1)
    elif mode == "wrap":
        ind = ind % n
    else:
        ind = np.where(ind < 0, ind + n, ind)
    a[np.unravel_index(ind, np.shape(a))] = _cycled(v, len(ind))


def _putmask(a: Any, mask: Any, values: Any) -> None:
    pos = np.flatnonzero(np.broadcast_to(mask, np.shape(a)))
    a[np.unravel_index(pos, np.shape(a))] = _cycled(values, len(pos), pos)


def _place(arr: Any, mask: Any, vals: Any) -> None:
    pos = np.flatnonzero(np.broadcast_to(mask, np.shape(arr)))
    arr[np.unravel_index(pos, np.shape(arr))] = _cycled(vals, len(pos))


def _fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    shape = np.shape(a)
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if wrap else shape[1] * shape[1]
    else:
        step = 1 + int(np.sum(np.cumprod(shape[:-1])))
        end = None
    idx = np.arange(np.size(a))[:end:step]
    a[np.unravel_index(idx, shape)] = _cycled(val, len(idx))


def _ufunc_at(ufunc: Any, a: Any, indices: Any, b: Any = None) -> None:
    """``np.add.at(a, indices, b)`` (and ``subtract``): unbuffered scatter-add."""
    if ufunc not in (np.add, np.subtract) or b is None:
        raise _rules.MissingRuleError(f"no reverse-mode derivative rule for numpy.{ufunc.__name__}"
                                      f".at under ReverseContext (only add.at and subtract.at)")
    pos = np.reshape(np.arange(np.size(a)), np.shape(a))[indices]
    weights = np.ravel(np.broadcast_to(b, np.shape(pos)))
    total = np.reshape(np.bincount(np.ravel(pos), weights, np.size(a)), np.shape(a))
    a[...] = a + total if ufunc is np.add else a - total


_REPLACEMENTS = {id(f): (f, r) for f, r in ((np.fill_diagonal, _fill_diagonal), (np.put, _put),
                                            (np.putmask, _putmask), (np.place, _place))}


def _replacement(fn: Any) -> Any:
    """A differentiable Python version of an in-place NumPy function (None: there is none)."""
    found = _REPLACEMENTS.get(id(fn))
    if found is not None and found[0] is fn:
        return found[1]
    standin = _rules.standin(fn, _rules.vjp_rules)  # (SciPy's solvers, restated by the rule
    # modules; a rule registered for fn wins)
    if standin is not None:
        return standin
    if type(fn) is _BuiltinMethod:
        owner = fn.__self__
        if isinstance(owner, np.ufunc) and fn.__name__ == "at":
            return functools.partial(_ufunc_at, owner)
        if isinstance(owner, (np.ndarray, np.generic)) and fn.__name__ in _METHODS:
            # a method of a plain array given a differentiated argument (a.dot(x), a.fill(x))
            return functools.partial(_METHODS[fn.__name__], owner)
    return None


class _Flat:
    """``x.flat`` of a differentiated array: reads and writes by flat position."""

    def __init__(self, x: Any) -> None:
        self.x = x

    def __getitem__(self, i: Any) -> Any:
        return np.ravel(self.x)[i]

    def __setitem__(self, i: Any, value: Any) -> None:
        x = self.x
        self.x[np.unravel_index(np.arange(np.size(x))[i], np.shape(x))] = value

    def __len__(self) -> int:
        return np.size(self.x)

    def __iter__(self) -> Any:
        return iter(np.ravel(self.x))


_METHODS: dict[str, Any] = {
    name: getattr(np, name) for name in (
        "sum", "mean", "prod", "max", "min", "std", "var", "cumsum", "cumprod", "ravel",
        "squeeze", "swapaxes", "dot", "clip", "conj", "conjugate", "trace", "take", "repeat",
        "diagonal", "round", "argmax", "argmin", "argsort", "nonzero", "all", "any",
        "searchsorted") if hasattr(np.ndarray, name)}
_METHODS.update({"reshape": _m_reshape, "transpose": _m_transpose, "flatten": _m_flatten,
                 "copy": _m_copy, "astype": _m_astype, "item": _m_item, "tolist": _m_tolist,
                 "fill": _m_fill, "sort": _m_sort, "compress": _m_compress, "view": _m_view,
                 "put": _put, "__array_wrap__": _m_array_wrap})


def _swapped(op: Any) -> Any:
    def reflected(x: Any, other: Any) -> Any:  # x.__radd__(other) is other + x
        return op(other, x)
    return reflected


# An operator's method called by name (x.__mul__(y), y.__imul__(2.0)) is the operator, which
# the engines differentiate (in place for __imul__ and the like)
for _name, _pure, _inplace in (
        ("add", operator.add, operator.iadd), ("sub", operator.sub, operator.isub),
        ("mul", operator.mul, operator.imul), ("truediv", operator.truediv, operator.itruediv),
        ("floordiv", operator.floordiv, operator.ifloordiv), ("mod", operator.mod, operator.imod),
        ("pow", operator.pow, operator.ipow), ("matmul", operator.matmul, operator.imatmul)):
    _METHODS.update({f"__{_name}__": _pure, f"__r{_name}__": _swapped(_pure),
                     f"__i{_name}__": _inplace})


# -- in-place writes as functions ------------------------------------------------------------

def _write(before: np.ndarray, index: Any, value: Any = None) -> np.ndarray:
    out: np.ndarray = before.copy()
    out[index] = value
    return out


def _written(before: Any, index: Any) -> Any:
    mask = np.zeros(np.shape(before), dtype=bool)
    mask[index] = True
    return mask


def _write_ct_array(ct: Any, out: Any, before: Any, index: Any, value: Any = None) -> Any:
    return np.where(_written(before, index), 0.0 * ct, ct)


def _write_ct_value(ct: Any, out: Any, before: Any, index: Any, value: Any) -> Any:
    picked = np.asarray(ct)[index]
    if _advanced(index):  # a position written twice keeps the last value written there
        ids = np.arange(np.size(picked)).reshape(np.shape(picked))
        owner = np.full(np.shape(before), -1)
        owner[index] = ids
        picked = np.where(owner[index] == ids, picked, 0.0 * picked)
    return picked


# The engine's own: not in the public rule tables (it is never called, only recorded).
_WRITE_VJPS = (_write_ct_array, _rules.ZERO, _write_ct_value)


def _carries_int(fn: Any, inputs: list[Any], joint: Any) -> bool:
    """Whether the integer result of ``fn`` on differentiated ``inputs`` carries their
    derivative, as in forward mode: a rule that is not ``ZERO`` reads one of them.  So
    ``max(0, x)`` below 0 -- the constant 0 won -- is differentiated, with derivative 0 (the
    rules of ``max``), and so is ``max(0, x) + max(0, y)``; ``math.floor(x)`` is not."""
    if joint is not None:
        return True
    rules = _rules.vjp_rules(fn)
    return rules is not None and any(
        node is not None and i < len(rules) and rules[i] is not None
        and rules[i] is not _rules.ZERO for i, node in enumerate(inputs))


def _vjps(fn: Any) -> tuple[Any, ...]:
    rules = _WRITE_VJPS if fn is _write else _rules.vjp_rules(fn)
    assert rules is not None  # only functions with rules are recorded
    return rules


# -- the backward sweep --------------------------------------------------------------------

def _unbroadcast(ct: Any, x: Any) -> Any:
    """``ct`` summed to ``x``'s shape (broadcast dimensions), real if ``x`` is real."""
    shape = np.shape(x)
    if np.shape(ct) != shape:
        extra = np.ndim(ct) - len(shape)
        if extra > 0:
            ct = np.sum(ct, axis=tuple(range(extra)))
        axes = tuple([i for i, n in enumerate(shape) if n == 1 and np.shape(ct)[i] != 1])
        if axes:
            ct = np.sum(ct, axis=axes, keepdims=True)
        ct = np.reshape(ct, shape)
    if np.iscomplexobj(ct) and not np.iscomplexobj(x):
        ct = np.real(ct)
    return ct


def _summed(ct: Any, x: Any) -> Any:
    """:func:`_unbroadcast` for the sweep with no enclosing context: its common case -- a
    cotangent with extra leading axes, as for a bias added to every row of a batch -- is one
    reduction, without ``np.sum``'s Python layers."""
    if type(ct) is np.ndarray and type(x) is np.ndarray and x.ndim:
        extra = ct.ndim - x.ndim
        if extra > 0 and ct.shape[extra:] == x.shape and \
                (ct.dtype.kind != "c" or x.dtype.kind == "c"):
            return np.add.reduce(ct, axis=0 if extra == 1 else tuple(range(extra)))
    return _unbroadcast(ct, x)


class _Forwarding(Context):
    """A context that changes nothing but hands the enclosing context, whole, each call of a
    function with rules or a stand-in (``scipy.linalg.expm``, SciPy's ``quad`` in a rule):
    recursing into its Python code, it would show the enclosing context only the C routines
    at the bottom, which have no rules."""

    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        return (type(fn) is types.FunctionType and _rules.vjp_rules(fn) is not None) or (
            bool(_rules._STANDINS) and _rules.standin(fn) is not None)

    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.fallback(fn, *args, **kwargs)


class _NestedSweep:
    """The backward sweep under an enclosing context.  The bookkeeping (which node gets which
    cotangent) runs natively: values are only moved, and a dict keeps the enclosing context's
    tagged values as they are.  Every computation on values -- the rules, the sums over
    broadcast dimensions, the accumulation -- runs through the enclosing context (a bare
    context forwards it there), which sees it and may differentiate it."""

    __slots__ = ("cts", "bare")

    def __init__(self, cts: dict[Any, Any]) -> None:
        self.cts = cts
        self.bare = _Forwarding()

    def compute(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return overdub(self.bare, fn, *args, **kwargs)

    def add(self, node: Any, part: Any) -> None:
        cts = self.cts
        if node in cts:
            cts[node] = self.compute(operator.add, cts[node], part)
        else:
            cts[node] = part

    def send(self, node: Any, part: Any, x: Any) -> None:
        if node is None or part is None:
            return
        if type(node) is list:
            if _read_as_array(part, x):
                part = self.compute(_unbroadcast, part, x)
            for k, (n, item) in enumerate(zip(node, x)):
                # an array's rows read through the enclosing context, which keeps their tags
                p = part[k] if type(part) in (list, tuple) else \
                    self.compute(operator.getitem, part, k)
                self.send(n, p, item)
            return
        if np.shape(part) != np.shape(x) or (np.iscomplexobj(part) and not np.iscomplexobj(x)):
            part = self.compute(_unbroadcast, part, x)
        self.add(node, part)

    def run(self, tape: list[Any]) -> dict[Any, Any]:
        cts = self.cts
        for entry in reversed(tape):
            if type(entry) is tuple:
                ct = cts.pop(entry[0], None)
                if ct is None:
                    continue
                if len(entry) == 4:  # x[i], a scalar read
                    _, node, index, x = entry
                    self.send(node, self.compute(_vjps(operator.getitem)[0], ct, None, x, index),
                              x)
                    continue
                items = iter(entry)
                next(items)
                for node, p in zip(items, items):  # (node, partial) pairs
                    if node is not None:
                        self.add(node, self.compute(operator.mul, ct, p))
                continue
            outputs = entry.outputs
            if type(outputs) is tuple:
                ct = tuple([cts.pop(n, None) if n is not None else None for n in outputs])
                if all(c is None for c in ct):
                    continue
            else:
                ct = cts.pop(outputs, None)
                if ct is None:
                    continue
            if entry.joint is not None:
                if type(ct) is tuple:
                    ct = tuple([_zero_like(o) if c is None else c for c, o in zip(ct, entry.out)])
                parts = self.compute(entry.joint, ct)
                if not isinstance(parts, (tuple, list)):
                    parts = (parts,)
                for node, part, x in zip(entry.inputs, parts, entry.primals):
                    self.send(node, part, x)
                parts = part = ct = None
                continue
            rules = _vjps(entry.fn)
            for i, node in enumerate(entry.inputs):
                if node is None or rules[i] is _rules.ZERO:
                    continue
                if type(rules[i]) is _rules.Carried:  # told which arguments are differentiated
                    part = self.compute(rules[i].rule, _rules.carried_pattern(entry.inputs), ct,
                                        entry.out, *entry.primals, **entry.kwargs)
                else:
                    part = self.compute(rules[i], ct, entry.out, *entry.primals, **entry.kwargs)
                self.send(node, part, entry.primals[i])
        return cts


def _read_as_array(part: Any, x: Any) -> bool:
    """Whether ``part``, the cotangent of a list that NumPy read as the array ``x``
    (``np.ones(3) + [s]``), is first summed over the dimensions ``x`` was broadcast along."""
    return type(part) not in (list, tuple) and type(_innermost(x)) is np.ndarray and \
        np.shape(_innermost(part)) != _innermost(x).shape


def _zero_like(x: Any) -> Any:
    x = _innermost(x)
    if isinstance(x, np.ndarray):
        return np.zeros_like(x, dtype=np.result_type(x, 0.0))
    if _arrays.is_foreign_array(x):
        return _arrays.zeros(x)
    return 0.0 * x if isinstance(x, (complex, np.complexfloating)) else 0.0


class _Sweep:
    """The backward sweep with no enclosing context: plain NumPy, accumulating in place into
    cotangent buffers it allocated itself."""

    __slots__ = ("cts", "owned", "scalars")

    def __init__(self, cts: dict[Any, Any], size: int) -> None:
        self.cts = cts
        self.owned: set[Any] = set()
        self.scalars: list[Any] = [None] * size  # the cotangents of int nodes, by position

    def add(self, node: Any, part: Any) -> None:
        if type(node) is int:
            scalars = self.scalars
            c = scalars[node]
            scalars[node] = part if c is None else c + part
            return
        cts = self.cts
        c = cts.get(node)
        if c is None:
            cts[node] = part
            return
        if node in self.owned and (
                (type(part) is np.ndarray and part.shape == c.shape and part.dtype == c.dtype)
                or (np.shape(part) == c.shape and np.result_type(c, part) == c.dtype)):
            c += part
            return
        s = c + part
        cts[node] = s
        if type(s) is np.ndarray and s.ndim:
            self.owned.add(node)
        else:
            self.owned.discard(node)

    def send(self, node: Any, part: Any, x: Any) -> None:
        if node is None or part is None:
            return
        if type(node) is list:
            if _read_as_array(part, x):
                part = _summed(part, x)
            for n, p, item in zip(node, part, x):
                self.send(n, p, item)
            return
        kind = type(part)
        if kind is np.ndarray:  # most often already of x's shape and kind
            if not (type(x) is np.ndarray and part.shape == x.shape
                    and (part.dtype.kind != "c" or x.dtype.kind == "c")):
                part = _summed(part, x)
        elif not ((kind is float or kind is np.float64) and type(x) in _REAL_TYPES):
            part = _unbroadcast(part, x)
        self.add(node, part)

    def scatter(self, node: Any, ct: Any, x: np.ndarray, index: Any) -> None:
        """``x[index]``'s cotangent added into ``node``'s buffer, in place."""
        cts, owned = self.cts, self.owned
        buf = cts.get(node)
        if node not in owned or buf is None:
            dtype = np.result_type(x.dtype, 0.0)
            new = np.zeros(x.shape, dtype)
            if buf is not None:
                new += buf
            buf = cts[node] = new
            owned.add(node)
        if type(ct) not in _REAL_TYPES and np.iscomplexobj(ct) and not np.iscomplexobj(buf):
            ct = np.real(ct)
        buf[index] += ct

    def run(self, tape: list[Any], consume: bool = False) -> dict[Any, Any]:
        """``consume``: the tape is used once; each entry (and the values only it holds) is
        let go as soon as it is done, so memory falls as cotangents grow."""
        cts = self.cts
        pop, get = cts.pop, cts.get
        getitem = operator.getitem
        zero, carried = _rules.ZERO, _rules.Carried
        scalars = self.scalars
        send, ndarray, node_type = self.send, np.ndarray, _Node
        owned = self.owned
        entries = tape if consume else list(tape)
        take = entries.pop
        while entries:
            entry = take()
            if type(entry) is tuple:
                ct = scalars[entry[0]]
                if ct is None:
                    continue
                if len(entry) == 4:  # x[i], a scalar read
                    self.scatter(entry[1], ct, entry[3], entry[2])
                    continue
                items = iter(entry)
                next(items)
                for node, p in zip(items, items):  # (node, partial) pairs
                    if node is None:
                        continue
                    if type(node) is int:
                        c = scalars[node]
                        scalars[node] = ct * p if c is None else c + ct * p
                        continue
                    c = get(node)
                    if c is None:
                        cts[node] = ct * p
                    elif type(c) is float:  # never an owned buffer: what add would do
                        cts[node] = c + ct * p
                    else:
                        self.add(node, ct * p)
                continue
            outputs = entry.outputs
            if type(outputs) is tuple:
                ct = tuple([pop(n, None) if n is not None else None for n in outputs])
                if all(c is None for c in ct):
                    continue
            else:
                ct = pop(outputs, None)
                if ct is None:
                    continue
                if owned:
                    owned.discard(outputs)
            fn, joint = entry.fn, entry.joint
            if joint is not None:
                if type(ct) is tuple:
                    ct = tuple([_zero_like(o) if c is None else c for c, o in zip(ct, entry.out)])
                parts = joint(ct)
                if not isinstance(parts, (tuple, list)):
                    parts = (parts,)
                for node, part, x in zip(entry.inputs, parts, entry.primals):
                    self.send(node, part, x)
                parts = part = ct = None  # a recomputed block's cotangents go now
                continue
            if fn is getitem:
                x, index = entry.primals
                node = entry.inputs[0]
                if node is not None and type(x) is np.ndarray and _basic(index):
                    self.scatter(node, ct, x, index)
                    continue
            rules = entry.rules
            if rules is None:
                rules = _vjps(fn)
            inputs, out, primals, kwargs = entry.inputs, entry.out, entry.primals, entry.kwargs
            for i, node in enumerate(inputs):
                if node is None:
                    continue
                rule = rules[i]
                if rule is zero:
                    continue
                if type(rule) is carried:  # told which arguments are differentiated
                    part = rule.rule(_rules.carried_pattern(inputs), ct, out, *primals, **kwargs)
                elif kwargs:
                    part = rule(ct, out, *primals, **kwargs)
                else:
                    part = rule(ct, out, *primals)
                x = primals[i]
                # send's most common case: the first cotangent of an array, of its dtype
                if type(part) is ndarray and type(x) is ndarray and type(node) is node_type \
                        and part.dtype is x.dtype and get(node) is None:
                    cts[node] = part if part.shape == x.shape else _summed(part, x)
                else:
                    send(node, part, x)
        return cts


def _enclosed() -> bool:
    """Whether an enclosing context must see (and may differentiate) what we compute."""
    return current_context() is not None


def _pull(tape: list[Any], out_nodes: list[Any], ct_leaves: list[Any], nodes: dict[Any, Any],
          argnums: tuple[int, ...], fast: bool, consume: bool = False) -> tuple[Any, ...]:
    if fast:
        sweep = _Sweep({}, len(tape))
        for node, c in zip(out_nodes, ct_leaves):
            if node is not None and c is not None:
                sweep.add(node, c)
        return _gradients(nodes, argnums, sweep.run(tape, consume), unflatten)
    nested = _NestedSweep({})
    for node, c in zip(out_nodes, ct_leaves):
        if node is not None and c is not None:
            nested.add(node, c)
    return _gradients(nodes, argnums, nested.run(tape))


def _sweep(tape: list[Any], out_nodes: list[Any], ct_leaves: list[Any], nodes: dict[Any, Any],
           argnums: tuple[int, ...], consume: bool = False,
           enclosed: bool | None = None) -> tuple[Any, ...]:
    """The backward sweep, from output cotangents to input gradients.  Under an enclosing
    context what it computes runs through that context, so that an enclosing derivative
    differentiates it (see :class:`_NestedSweep`).  ``consume``: the tape is not needed
    afterwards (it is emptied as the sweep goes).  ``enclosed``: whether there is an
    enclosing context, if the caller knows already."""
    if enclosed is None:
        enclosed = _enclosed()
    return _pull(tape, out_nodes, ct_leaves, nodes, argnums, not enclosed, consume)


# -- the public API ------------------------------------------------------------------------

def _seeds(ctx: ReverseContext, leaves: list[Any]) -> tuple[list[Any], list[_Node]]:
    """The input ``leaves`` tagged, each with a new node; and the nodes."""
    tagged: list[Any] = []
    nodes: list[_Node] = []
    ref, label = ctx._ref, ctx._label
    for x in leaves:
        node = _Node()
        nodes.append(node)
        kind = type(x)
        if ref is not None and ((kind is np.ndarray and x.dtype.kind in "fc") or kind is float):
            tagged.append(Tagged(x, node, ref, label))  # the common case, as _seed does
        else:
            tagged.append(_seed(ctx, x, node))
            ref = ctx._ref  # (set by the first tag of a new context)
    return tagged, nodes


def _seed(ctx: ReverseContext, x: Any, node: _Node) -> Any:
    """Input ``x`` tagged with its ``node``.  ``None`` stays ``None``: an empty pytree (as in
    JAX), with nothing to differentiate and the gradient ``None``."""
    if x is None:
        return None
    kind = type(x)
    if (kind is np.ndarray and x.dtype.kind in "fc") or kind is float:
        return ctx._wrap(x, node)
    plain = _innermost(x)
    if not _arrays.is_numeric(plain) or \
            isinstance(plain, (bool, np.bool_)) or _arrays.kind(plain) == "b":
        what = f"{plain.dtype} array" if hasattr(plain, "dtype") else type(plain).__name__
        raise TypeError(f"cannot differentiate with respect to a {what} (expected floats, "
                        f"complex numbers or arrays of them)")
    if type(x) is not Tagged and _arrays.kind(plain) in "iu":  # an integer point
        x = _arrays.to_float(x)
    return ctx._wrap(untag(x, ctx), node)


def _forward(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             argnums: tuple[int, ...], enclosed: bool | None = None,
             second: bool = False) -> tuple[Any, ...]:
    """Run ``f`` on tagged inputs; returns the tape, the output (its tree, plain leaves and
    their nodes) and the input nodes.  The tape is detached from the context (which is part of
    reference cycles through its dispatchers): it is freed as soon as its holder lets go.
    ``enclosed``: whether there is an enclosing context, if the caller knows already;
    ``second``: the tape is for :mod:`._hvp` (see :attr:`ReverseContext.second`)."""
    ctx = _context(_enclosed() if enclosed is None else enclosed)
    ctx.second = second
    _routes.ran(_routes.REFERENCE, f, "reverse mode, the tape")
    inputs = list(args)
    nodes: dict[int, tuple[Any, ...]] = {}
    for num in argnums:
        leaves, tree = flatten(inputs[num])
        tagged, seeds = _seeds(ctx, leaves)
        inputs[num] = unflatten(tree, tagged)
        nodes[num] = (leaves, tree, seeds)
    try:
        out = overdub(ctx, _call_and_reveal, ctx, f, *inputs, **kwargs)
    finally:
        ctx.roots.clear()
        _untag_bindings(ctx, f)
    leaves, tree = flatten(out)
    out_nodes: list[Any] = []
    plain: list[Any] = []
    functions: list[Any] = []
    for y in leaves:
        out_nodes.append(ctx._node(y))
        plain.append(untag(y, ctx))
        if type(y) not in _NOT_FUNCTIONS:
            functions.append(y)
    if functions:
        _untag_bindings(ctx, *functions)  # closures among the outputs hold plain values
    if ctx.stores:
        ctx._release_stores()
    ctx.versions.clear()
    ctx.held.clear()
    ctx._functions.clear()
    ctx._specs.clear()
    ctx.tracking = False
    tape, ctx.tape = ctx.tape, []
    _done(ctx)
    return tape, (tree, plain, out_nodes), nodes


@opaque
def _call_and_reveal(ctx: ReverseContext, f: Callable[..., Any], /, *args: Any,
                     **kwargs: Any) -> Any:
    """``f(*args, **kwargs)`` under ``ctx``, the dataclasses and named tuples of its output
    read while the run still holds the metadata of their attributes (see ``_pytree.reveal``).
    Called inside ``ctx``'s run: the call of ``f`` is one more step of it (as forward mode's
    ``_call_and_reveal``)."""
    return reveal(ctx.overdub(f, *args, **kwargs), ctx.overdub)


# Not a primitive, and opaque: it runs natively, at once (no rule lookup at every gradient).
_DECISIONS[id(_call_and_reveal)] = (_call_and_reveal, False)


# Idle reverse contexts of this thread.  A context's first run builds its dispatchers and
# rewrites the functions it meets (tens of microseconds, more than a small gradient's own work),
# so one that finished a run serves the next: runs in progress (nested ones) take others.
_IDLE = threading.local()


def _context(nested: bool) -> ReverseContext:
    idle = getattr(_IDLE, "contexts", None)
    if idle:
        ctx: ReverseContext = idle.pop()
        ctx.nested = nested
        return ctx
    return ReverseContext(nested=nested)


def _done(ctx: ReverseContext) -> None:
    """``ctx`` finished its run (and holds nothing of it): it may serve the next one."""
    idle = getattr(_IDLE, "contexts", None)
    if idle is None:
        idle = _IDLE.contexts = []
    if len(idle) < 4 and type(ctx) is ReverseContext:
        idle.append(ctx)


def _release(tape: list[Any]) -> None:
    """The tape's values are no longer needed."""
    tape.clear()


def _gradients(nodes: dict[Any, Any], argnums: tuple[int, ...], cts: dict[Any, Any],
               build: Callable[[Any, list[Any]], Any] | None = None) -> tuple[Any, ...]:
    """The gradients of the arguments ``argnums``, in their pytrees.  ``build``: how a pytree is
    rebuilt from its leaves (:func:`_rebuild`, unless the caller knows there is no enclosing
    context: then the faster :func:`unflatten`)."""
    # Built with displays and comprehensions, never list.append: under an enclosing context a
    # stored value's metadata lives in that context's shadow, which the caller cannot read.
    rebuild = _rebuild if build is None else build
    return tuple([rebuild(nodes[num][1], [_cast(cts[n], x) if n in cts else _zeros_like(x)
                                          for n, x in zip(nodes[num][2], nodes[num][0])])
                  for num in argnums])


# Pytree helpers for code that may run under an enclosing context: no list.append, no
# iterators consumed by C functions (the enclosing context sees every value move).
def _rebuild(treedef: Any, leaves: list[Any]) -> Any:
    return _rebuild_at(treedef, leaves, 0)[0]


def _rebuild_at(node: Any, leaves: list[Any], start: int) -> tuple[Any, ...]:
    if node.kind == "leaf":
        return leaves[start], start + 1
    children, start = _rebuild_children(node.children, leaves, start)
    if node.kind is dict:
        return {k: c for k, c in zip(node.keys, children)}, start
    if node.kind is tuple or node.kind is list:
        return (list(children) if node.kind is list else children), start
    return rebuild_node(node, list(children)), start  # a named tuple, dataclass...


def _rebuild_children(children: tuple[Any, ...], leaves: list[Any], start: int) -> tuple[Any, ...]:
    if not children:
        return (), start
    first, start = _rebuild_at(children[0], leaves, start)
    rest, start = _rebuild_children(children[1:], leaves, start)
    return (first,) + rest, start


def _tree_leaves(tree: Any) -> list[Any]:
    kind = type(tree)
    if kind is tuple or kind is list:
        return [leaf for child in tree for leaf in _tree_leaves(child)]
    if kind is dict:
        return [leaf for key in tree for leaf in _tree_leaves(tree[key])]
    children = node_children(tree)  # a named tuple, dataclass...
    return [tree] if children is None else [leaf for c in children for leaf in _tree_leaves(c)]


def _zeros_like(x: Any) -> Any:
    plain = _innermost(x)
    if plain is None:  # an empty pytree's gradient (see _seed)
        return None
    if isinstance(plain, np.ndarray):
        return np.zeros_like(plain, dtype=np.result_type(plain, 0.0))
    if _arrays.is_foreign_array(plain):
        return _arrays.zeros(plain)
    return 0.0 * plain if isinstance(plain, (complex, np.complexfloating)) else 0.0


def _cast(ct: Any, x: Any) -> Any:
    """A cotangent in the type of its input: a float for a float, an array for an array."""
    kind = type(ct)
    if kind is np.ndarray and type(x) is np.ndarray and ct.dtype is x.dtype and \
            ct.shape == x.shape:  # the common case, as below
        return ct if ct.flags.writeable else ct.copy()
    if type(x) is float and (kind is float or kind is np.float64):
        return float(ct)
    plain = _innermost(x)
    if kind is Tagged:
        return ct
    if isinstance(plain, np.ndarray):
        ct = np.asarray(ct)
        if ct.shape != plain.shape:
            ct = np.broadcast_to(ct, plain.shape)
        if plain.dtype.kind in "fc" and ct.dtype != plain.dtype:
            return ct.astype(plain.dtype)  # a float32 input's gradient is float32 (as autograd)
        return ct if ct.flags.writeable else ct.copy()
    if _arrays.is_foreign_array(plain):
        return _arrays.cast(ct, plain)
    if isinstance(plain, np.generic) and not isinstance(plain, (float, complex)) and \
            plain.dtype.kind in "fc" and np.ndim(ct) == 0:  # np.float32: a float32 gradient
        return plain.dtype.type(ct if plain.dtype.kind == "c" else np.real(ct))
    if isinstance(plain, (float, int)) and not isinstance(plain, bool) and np.ndim(ct) == 0:
        return float(np.real(ct))
    if isinstance(plain, complex) and np.ndim(ct) == 0:
        return complex(ct)
    return ct


def _check_ct(tree: Any, leaves: list[Any], ct: Any) -> list[Any]:
    ct_leaves, ct_tree = flatten(ct)
    if ct_tree != tree:
        raise ValueError(f"pullback: the cotangent's structure {ct_tree} does not match the "
                         f"output's {tree}")
    for y, c in zip(leaves, ct_leaves):
        if c is not None and callable(y) and not _arrays.is_numeric(y):
            raise TypeError(f"pullback: an output is the function {y!r}, which has no "
                            f"cotangent; pull back through the function applied (vjp of "
                            f"x -> f(x)(y)), or use grad or jacrev, whose result is then a "
                            f"function")
        if c is not None and np.shape(_innermost(c)) != np.shape(_innermost(y)):
            raise ValueError(f"pullback: a cotangent of shape {np.shape(_innermost(c))} for an "
                             f"output of shape {np.shape(_innermost(y))}")
    return ct_leaves


@opaque
@_entry
def vjp(f: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
    """``(f(*primals), pullback)``; ``pullback(ct)`` gives the cotangent of every primal.

    Primals and the output are pytrees of floats, complex numbers and arrays.  The tape lives
    as long as ``pullback`` does; ``pullback`` may be called any number of times.

    Example::

        out, pullback = vjp(lambda x: np.sin(x) * 2, np.ones(3))
        pullback(np.ones(3))   # (2 * cos(1) * ones(3),)

    See also: :func:`grad`, :func:`jacrev`, :func:`overdub_ad.jvp`.
    """
    if not callable(f):
        raise TypeError(f"vjp: f must be callable, got {f!r}")
    argnums = tuple(range(len(primals)))
    tape, (tree, plain, out_nodes), nodes = _forward(f, primals, {}, argnums)

    @opaque
    @_entry
    def pullback(ct: Any) -> tuple[Any, ...]:
        return _sweep(tape, out_nodes, _check_ct(tree, plain, ct), nodes, argnums)

    return unflatten(tree, plain), pullback


def check_argnums(api: str, argnums: Any) -> None:
    """``argnums`` is an int or a non-empty tuple of distinct ints (JAX's rule), checked where
    the API is given it; whether they are in range is known at the call."""
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    if not all(isinstance(num, int) and not isinstance(num, bool) for num in nums):
        raise TypeError(f"{api}: argnums must be an int or a tuple of ints, got {argnums!r}")
    if not nums:
        raise ValueError(f"{api}: argnums=() selects no argument to differentiate")
    if len(set(nums)) != len(nums):
        raise ValueError(f"{api}: argnums {argnums!r} repeats an argument")


def _normalize_argnums(argnums: Any, n: int) -> tuple[int, ...]:
    if type(argnums) is int and 0 <= argnums < n:  # the common case
        return (argnums,)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    for num in nums:
        if not -n <= num < n:
            raise ValueError(f"argnums {argnums!r} out of range for {n} positional arguments")
    normalized = tuple(num % n for num in nums)
    if len(set(normalized)) != len(normalized):  # (0, -2) with two arguments
        raise ValueError(f"argnums {argnums!r} names argument {normalized[0]} twice")
    return normalized


@opaque
@_entry
def value_and_grad(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False, holomorphic: bool = False) -> Callable[..., Any]:
    """A function returning ``(f(*args), grad)`` (``((value, aux), grad)`` with ``has_aux``)."""
    if not callable(f):
        raise TypeError(f"value_and_grad: f must be callable, got {f!r}")
    check_argnums("value_and_grad", argnums)

    @opaque
    @_entry
    def value_and_gradient(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        nums = _normalize_argnums(argnums, len(args))
        enclosed = _enclosed()
        tape, (tree, plain, out_nodes), nodes = _forward(f, args, kwargs, nums, enclosed)
        out = unflatten(tree, plain)
        aux = None
        value_nodes = out_nodes
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("has_aux=True: f must return a pair (output, auxiliary data)")
            out, aux = out
            value_nodes = out_nodes[:len(flatten(out)[0])]
        value = out
        inner = _innermost(value)
        seed: Any = 1.0
        if type(inner) is not float and _not_a_number(inner):
            _release(tape)
            _check_output(inner, "grad")  # None, a str: raises
        if type(inner) is not float and value_nodes and value_nodes[0] is None and \
                type(value) is not Tagged:  # (not an enclosing derivative's either)
            _release(tape)
            _check_differentiated(inner, False, "grad")  # a constant int, a bool: raises
        if type(inner) not in _REAL_TYPES:  # (a real number passes every check below)
            if callable(inner) and not _arrays.is_numeric(inner):
                _release(tape)
                lazy = _FunctionGradient(f, args, kwargs, argnums, has_aux, holomorphic)
                return ((value, aux), lazy) if has_aux else (value, lazy)
            if isinstance(inner, (tuple, list, dict)) or np.size(inner) != 1:
                # (one element in any shape, (1,) or (1, 1), is a scalar: autograd and
                # PyTorch take it too)
                got = (f"a {type(inner).__name__}" if isinstance(inner, (tuple, list, dict))
                       else f"shape {np.shape(inner)}")
                raise TypeError(f"grad requires a scalar output, got {got}; use jacrev for a "
                                f"Jacobian or vjp for a vector-Jacobian product")
            if _arrays.is_complex(inner) and not holomorphic:
                raise TypeError("grad of a complex-valued function: pass holomorphic=True for "
                                "the complex derivative, or take the real part")
            # a foreign array's seed is one of its namespace, so that the rules compute there
            # NumPy's: in the output's precision, so that a float32 function's backward pass
            # (and a derivative of it, hessian) stays in float32
            seed = _arrays.one_like(inner) if _arrays.is_foreign_array(inner) else \
                np.ones_like(inner) if isinstance(inner, np.ndarray) else \
                inner.dtype.type(1) if isinstance(inner, np.generic) else \
                1.0 + 0.0 * inner if np.iscomplexobj(inner) else 1.0
        grads = _pull(tape, value_nodes, [seed], nodes, nums, not enclosed, consume=True)
        _release(tape)
        result = grads if isinstance(argnums, tuple) else grads[0]
        return ((value, aux), result) if has_aux else (value, result)

    return value_and_gradient


class _FunctionGradient:
    """The gradient of a function-valued function, applied lazily, like forward mode's
    derivative of one (Manzyuk et al., JFP 2019): the gradient of ``x -> g_x`` at ``x0`` is
    the function ``y -> grad(x -> g_x(y))(x0)``, each call a fresh tape."""

    def __init__(self, f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 argnums: int | tuple[int, ...], has_aux: bool, holomorphic: bool) -> None:
        self.f, self.args, self.kwargs = f, args, kwargs
        self.argnums, self.has_aux, self.holomorphic = argnums, has_aux, holomorphic

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f, outer_kwargs, has_aux = self.f, self.kwargs, self.has_aux

        def applied(*xs: Any) -> Any:
            out = f(*xs, **outer_kwargs)
            return (out[0] if has_aux else out)(*args, **kwargs)

        return grad(applied, self.argnums, holomorphic=self.holomorphic)(*self.args)


@opaque
@_entry
def grad(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable[..., Any]:
    """The gradient of scalar-valued ``f`` with respect to argument(s) ``argnums``.

    For real-valued ``f`` of complex ``z = x + iy`` the gradient is ``df/dx - i df/dy`` (JAX's
    and autograd's convention; PyTorch returns its conjugate).  ``holomorphic=True`` gives the
    complex derivative ``f'(z)`` of a holomorphic ``f``.

    Example::

        grad(lambda x: np.sum(np.sin(x)))(np.zeros(3))   # ones(3)
    """
    if not callable(f):
        raise TypeError(f"grad: f must be callable, got {f!r}")
    check_argnums("grad", argnums)
    value_and_gradient = value_and_grad(f, argnums, has_aux, holomorphic)

    @opaque
    @_entry
    def gradient(*args: Any, **kwargs: Any) -> Any:
        out = value_and_gradient(*args, **kwargs)
        return (out[1], out[0][1]) if has_aux else out[1]

    return gradient


def _assemble(rows: list[Any], y: Any, nodes: dict[Any, Any], nums: tuple[int, ...],
              multiple: bool) -> Any:
    """Jacobian blocks from the rows (one sweep per element of output ``y``).  Built with
    comprehensions: it may run under an enclosing context (no list.append)."""
    shape = np.shape(_innermost(y))
    per_num = [_rebuild(nodes[num][1], [_block(rows, i, j, shape, x)
                                        for j, x in enumerate(nodes[num][0])])
               for i, num in enumerate(nums)]
    return tuple(per_num) if multiple else per_num[0]


def _block(rows: list[Any], i: int, j: int, shape: tuple[int, ...], x: Any) -> Any:
    if x is None:  # an empty pytree (see _seed)
        return None
    xshape = np.shape(_innermost(x))
    if not rows:
        return np.zeros(shape + xshape)
    stacked = np.stack([np.asarray(_tree_leaves(r[i])[j]) for r in rows])
    return np.reshape(stacked, shape + xshape)


@opaque
@_entry
def jacrev(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``f`` by reverse mode: one pullback per output element.

    Shape ``out.shape + x.shape`` (JAX's convention), for each output leaf and each input
    leaf of pytrees; ``jacobian`` is the same function.  For complex inputs and outputs the
    entries are complex derivatives ``df_i/dz_j`` of a holomorphic ``f``; ``holomorphic=True``
    says so (as for :func:`grad` and in JAX), and then checks that the inputs and outputs are
    complex.
    """
    if not callable(f):
        raise TypeError(f"jacrev: f must be callable, got {f!r}")
    check_argnums("jacrev", argnums)

    @opaque
    @_entry
    def jacobian(*args: Any) -> Any:
        nums = _normalize_argnums(argnums, len(args))
        if holomorphic:
            _check_complex("inputs", [leaf for num in nums for leaf in flatten(args[num])[0]])
        tape, (tree, plain, out_nodes), nodes = _forward(f, args, {}, nums)
        if holomorphic:
            _check_complex("outputs", plain)
        if len(plain) == 1 and _not_a_number(_innermost(plain[0])):
            _release(tape)
            _check_output(plain[0], "jacrev")  # None, a str: raises
        if tree.kind == "leaf" and out_nodes[0] is None and type(plain[0]) is not Tagged:
            _release(tape)
            _check_differentiated(plain[0], False, "jacrev")  # a constant int, a bool: raises
        blocks = []
        enclosed = _enclosed()
        for k, y in enumerate(plain):
            inner = _innermost(y)
            if callable(inner) and not _arrays.is_numeric(inner):
                blocks.append(_FunctionJacobian(f, k, args, argnums))
                continue
            size = math.prod(np.shape(inner))
            # unit cotangents: in the output's namespace for an array of another one
            units = _arrays.directions(inner, 0, size) if _arrays.is_foreign_array(inner) \
                else None
            if units is None:
                inner = np.asarray(inner)
                dtype = inner.dtype if inner.dtype.kind in "fc" else np.dtype(float)
            rows = []
            for e in range(size):
                cts: list[Any] = [None] * len(plain)
                if units is not None:
                    cts[k] = units[e, ...]
                else:
                    basis = np.zeros(inner.size, dtype=dtype)
                    basis[e] = 1.0
                    cts[k] = basis.reshape(inner.shape) if inner.ndim else basis[0]
                rows.append(_sweep(tape, out_nodes, cts, nodes, nums))
            args_ = (rows, y, nodes, nums, isinstance(argnums, tuple))
            blocks.append(overdub(Context(), _assemble, *args_) if enclosed
                          else _assemble(*args_))
        _release(tape)
        return unflatten(tree, blocks)

    return jacobian


jacobian = jacrev


def _check_complex(what: str, leaves: list[Any]) -> None:
    for leaf in leaves:
        plain = _innermost(leaf)
        if not (callable(plain) and not _arrays.is_numeric(plain)) and \
                not _arrays.is_complex(plain):
            raise TypeError(f"jacrev(holomorphic=True) requires complex {what}, got "
                            f"{getattr(plain, 'dtype', type(plain).__name__)}")


class _FunctionJacobian:
    """The Jacobian of output leaf ``leaf`` of ``f`` when that leaf is a function: a function
    too, ``y -> jacrev(x -> f(x)[leaf](y))(x0)``, applied lazily like :class:`_FunctionGradient`."""

    def __init__(self, f: Callable[..., Any], leaf: int, args: tuple[Any, ...],
                 argnums: int | tuple[int, ...]) -> None:
        self.f, self.leaf, self.args, self.argnums = f, leaf, args, argnums

    @opaque
    @_entry
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        f, leaf = self.f, self.leaf
        return jacrev(lambda *xs: flatten(f(*xs))[0][leaf](*args, **kwargs),
                      self.argnums)(*self.args)


@opaque
@_entry
def hessian(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The Hessian of scalar ``f``: forward-over-reverse (``jacfwd(grad(f))``)."""
    from ._forward import jacfwd
    check_argnums("hessian", argnums)
    return jacfwd(grad(f, argnums), argnums)


@opaque
@_entry
def hvp(f: Callable[..., Any], x: Any, v: Any) -> Any:
    """``H(x) @ v`` for scalar ``f``, by forward-over-reverse without forming ``H``.

    With no enclosing context the forward mode runs over the recorded tape (see
    :mod:`overdub_ad._hvp`); inside one, or for a tape it does not handle, it is
    ``jvp(grad(f), (x,), (v,))``.
    """
    if not callable(f):
        raise TypeError(f"hvp: f must be callable, got {f!r}")
    xleaves, xtree = flatten(x)
    vleaves, vtree = flatten(v)
    if vtree != xtree:
        raise ValueError(f"hvp: the direction's structure {vtree} does not match x's {xtree}")
    for leaf, d in zip(xleaves, vleaves):
        if d is not None and np.shape(d) != np.shape(leaf):
            raise ValueError(f"hvp: a direction of shape {np.shape(d)} for an argument of "
                             f"shape {np.shape(leaf)}")
    if not _enclosed() and (_routes.enabled("hvp-tape") or _routes.enabled("hvp-compiled")):
        from ._hvp import _DECLINED, tape_hvp
        result = tape_hvp(f, x, v)
        if result is not _DECLINED:
            return result
    elif _enclosed():
        _routes.declined("hvp-tape", "inside an enclosing context", f)
    _routes.ran(_routes.REFERENCE, f, "hvp as jvp(grad(f))")
    from ._forward import jvp
    return jvp(grad(f), (x,), (v,))[1]


class custom_vjp:
    """A function with a user-defined reverse rule (JAX's API).

    ``fwd(*args) -> (out, residuals)`` runs instead of ``fn`` when differentiated in reverse
    mode; ``bwd(residuals, ct) -> tuple of cotangents`` (one per positional argument, ``None``
    for none).  Forward mode differentiates ``fn`` itself.

    Example::

        @custom_vjp
        def f(x): return np.sin(x)
        def f_fwd(x): return np.sin(x), np.cos(x)
        def f_bwd(cos_x, ct): return (ct * cos_x,)
        f.defvjp(f_fwd, f_bwd)
    """

    _wants_inputs: bool  # set by checkpoint: bwd is told which inputs need a cotangent

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"custom_vjp: {fn!r} is not callable")
        self.fn = fn
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", "custom_vjp")

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> custom_vjp:
        if not (callable(fwd) and callable(bwd)):
            raise TypeError("custom_vjp.defvjp(fwd, bwd): both must be callable")
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A method: ``layer.act(x)`` is ``act(layer, x)``, the instance its first argument
        (as for any function; JAX's wrappers do the same)."""
        return self if instance is None else functools.partial(self, instance)


@opaque
@_entry
def checkpoint(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` that stores nothing on the tape but its inputs: the backward pass recomputes it.

    Trades time for memory (gradient checkpointing): a 100-layer network's gradient keeps one
    layer's intermediates at a time instead of all of them.
    """
    if not callable(f):
        raise TypeError(f"checkpoint: {f!r} is not callable")
    checkpointed = custom_vjp(f)

    def fwd(*args: Any) -> tuple[Any, ...]:
        return f(*args), args

    def bwd(args: tuple[Any, ...], ct: Any,
            wanted: tuple[int, ...] | None = None) -> tuple[Any, ...]:
        return _recompute(f, args, ct, tuple(range(len(args))) if wanted is None else wanted)

    checkpointed.defvjp(fwd, bwd)
    checkpointed._wants_inputs = True
    return checkpointed


@opaque
def _recompute(f: Callable[..., Any], args: tuple[Any, ...], ct: Any,
               wanted: tuple[int, ...]) -> tuple[Any, ...]:
    """The cotangents of the arguments ``wanted`` of ``f`` (None for the others), by a fresh
    forward pass whose tape is released at once."""
    tape, (tree, plain, out_nodes), nodes = _forward(f, args, {}, wanted)
    try:
        grads = _sweep(tape, out_nodes, _check_ct(tree, plain, ct), nodes, wanted, consume=True)
    finally:
        _release(tape)
    return tuple([grads[wanted.index(i)] if i in wanted else None for i in range(len(args))])
