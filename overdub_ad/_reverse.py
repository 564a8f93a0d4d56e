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
forward-over-reverse.

Mutation: arrays are versioned.  Writing into a plain array (``a[i] = v``, ``a += b``,
``np.add(a, b, out=a)``) records a functional update on the tape and makes the array stand for
its new node; values an entry needs that are later overwritten in place are copied first, so the
backward pass sees the values the forward pass used.  The array object itself is never
replaced: a preallocated cache outside the function keeps working, and holds plain numbers.
"""

from __future__ import annotations

import numbers
import operator
import types
import weakref
from typing import Any, Callable

import numpy as np

from overdub import (Context, Tagged, can_recurse, carries_tags, opaque, overdub, tag, untag)

from . import _rules
from ._pytree import flatten, unflatten

_PYTHON_CODE = (types.FunctionType, types.MethodType)
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub,
            operator.imul: operator.mul, operator.itruediv: operator.truediv,
            operator.ipow: operator.pow, operator.imatmul: operator.matmul}
_ATTRIBUTES = {"real": np.real, "imag": np.imag, "T": np.transpose}


class _Node:
    """A differentiated value on the tape (identity only)."""

    __slots__ = ("__weakref__",)


class _Entry:
    """One primitive call: how to send its output cotangent back to its arguments."""

    __slots__ = ("fn", "primals", "kwargs", "out", "inputs", "outputs", "joint")

    def __init__(self, fn: Any, primals: list, kwargs: dict, out: Any, inputs: list,
                 outputs: Any, joint: Callable | None = None) -> None:
        self.fn, self.primals, self.kwargs, self.out = fn, primals, kwargs, out
        self.inputs = inputs    # per positional argument: a node, a list of nodes, or None
        self.outputs = outputs  # a node, or a tuple/list of nodes (None for integer outputs)
        self.joint = joint      # custom_vjp / checkpoint: ct -> all argument cotangents


def _is_differentiable(x: Any) -> bool:
    """A float or complex number or array (an enclosing context's tags looked through)."""
    while type(x) is Tagged:
        x = x.value
    return isinstance(x, (numbers.Number, np.ndarray, np.generic)) and not isinstance(x, bool) \
        and np.result_type(x).kind in "fc"


class ReverseContext(Context):
    """The reverse-mode context: one instance (and one tape) per ``vjp`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.tape: list[_Entry] = []
        # Arrays written to in place: id -> (weak ref, node of their current value).
        self.versions: dict[int, tuple] = {}
        # Arrays the tape holds as primal values: id -> (array, [(entry, position)]), so that an
        # in-place write first copies the value the entries need.
        self.held: dict[int, tuple] = {}

    def metadata_type(self, value_type: type) -> Any:
        if issubclass(value_type, (numbers.Number, np.ndarray, np.generic)):
            return _Node
        return None

    # -- which calls are ours ----------------------------------------------------------------
    def _node(self, x: Any) -> Any:
        """The node ``x`` stands for in this context, or None."""
        if type(x) is Tagged:
            if x.owner() is not self:
                return None
            if self.versions and type(x.value) is np.ndarray:  # written to since it was tagged
                slot = self.versions.get(id(x.value))
                if slot is not None and slot[0]() is x.value:
                    return slot[1]
            return x.meta
        if type(x) is np.ndarray and self.versions:
            slot = self.versions.get(id(x))
            if slot is not None and slot[0]() is x:
                return slot[1]
        return None

    def _carries(self, x: Any) -> bool:
        if self._node(x) is not None:
            return True
        return type(x) in (list, tuple) and any(self._node(v) is not None for v in x)

    def is_primitive(self, fn: Any, /, *args: Any, **kwargs: Any) -> bool:
        if fn in (operator.setitem, operator.delitem) and isinstance(untag(args[0], self),
                                                                     np.ndarray):
            return self._carries(args[-1]) or self._node(args[0]) is not None
        if kwargs.get("out") is not None and isinstance(kwargs["out"], np.ndarray):
            return True
        direct = any(self._node(a) is not None for a in args) or \
            any(self._node(v) is not None for v in kwargs.values())
        if not direct:
            # Differentiated values inside a list argument: only functions with rules for the
            # list (np.concatenate, np.array...) act on them; others (zip, list) just move them.
            return any(map(self._carries, args)) and _rules.vjp_rules(fn) is not None
        if isinstance(fn, custom_vjp) or fn is getattr:
            return True
        if _rules.vjp_rules(fn) is not None or _rules.is_nondifferentiable(fn):
            return True
        if carries_tags(fn):
            return False  # the tag machinery moves it (heap), or looks at the plain value
        python = isinstance(fn, _PYTHON_CODE) or isinstance(getattr(type(fn), "__call__", None),
                                                            types.FunctionType)
        return not python and not can_recurse(self, fn, *args, **kwargs)

    # -- recording -----------------------------------------------------------------------------
    def execute(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if fn is getattr:
            return self._attribute(*args)
        if fn in (operator.setitem, operator.delitem):
            return self._write_item(fn, *args)
        if fn in _INPLACE and isinstance(untag(args[0], self), np.ndarray):
            return self._write_inplace(fn, *args)
        if kwargs.get("out") is not None:
            return self._write_out(fn, args, kwargs)
        primals = [self._plain(a) for a in args]
        inputs = [self._inputs(a) for a in args]
        plain_kwargs = {k: self._plain(v) for k, v in kwargs.items()}
        if any(self._carries(v) for v in kwargs.values()):
            raise _rules.missing(fn, 0, "reverse", type(self).__name__)
        if isinstance(fn, custom_vjp):
            out, residuals = self.fallback(fn.fwd, *primals, **plain_kwargs)
            bwd = fn.bwd
            return self._record(fn, primals, plain_kwargs, out, inputs,
                                joint=lambda ct: bwd(residuals, ct))
        out = self.fallback(fn, *primals, **plain_kwargs)
        if _rules.is_nondifferentiable(fn):
            return out
        rules = _rules.vjp_rules(fn)
        for i, node in enumerate(inputs):
            if node is not None and (rules is None or i >= len(rules) or rules[i] is None):
                raise _rules.missing(fn, i, "reverse", type(self).__name__)
        return self._record(fn, primals, plain_kwargs, out, inputs)

    def _plain(self, x: Any) -> Any:
        if type(x) in (list, tuple):
            return type(x)(untag(v, self) for v in x)
        return untag(x, self)

    def _inputs(self, x: Any) -> Any:
        if type(x) in (list, tuple):
            nodes = [self._node(v) for v in x]
            return nodes if any(n is not None for n in nodes) else None
        return self._node(x)

    def _record(self, fn: Any, primals: list, kwargs: dict, out: Any, inputs: list,
                joint: Callable | None = None) -> Any:
        if isinstance(out, (tuple, list)):
            outputs = type(out)(_Node() if _is_differentiable(o) else None for o in out)
            result = type(out)(o if n is None else tag(o, self, n) for o, n in zip(out, outputs))
        elif _is_differentiable(out):
            outputs = _Node()
            result = tag(out, self, outputs)
        else:
            return out
        entry = _Entry(fn, primals, kwargs, out, inputs, outputs, joint)
        self.tape.append(entry)
        for position, value in enumerate(primals):
            self._hold(value, entry, position)
        return result

    def _hold(self, value: Any, entry: _Entry, position: int) -> None:
        if type(value) is np.ndarray:
            slot = self.held.setdefault(id(value), (value, []))
            slot[1].append((entry, position))

    def _save_before_write(self, array: np.ndarray) -> None:
        """Entries that read ``array`` keep the value they read (copied once, before a write)."""
        slot = self.held.pop(id(array), None)
        if slot is None or slot[0] is not array:
            return
        saved = array.copy()
        for entry, position in slot[1]:
            if entry.primals[position] is array:
                entry.primals[position] = saved

    def _set_version(self, array: np.ndarray, node: _Node | None) -> None:
        key = id(array)
        if node is None:
            self.versions.pop(key, None)
            return
        versions = self.versions
        ref = weakref.ref(array, lambda _, key=key: versions.pop(key, None))
        versions[key] = (ref, node)

    def _write_item(self, fn: Any, container: Any, index: Any, *value: Any) -> Any:
        """``a[index] = value`` on an array: a functional update on the tape, in place."""
        array = untag(container, self)
        old_node = self._node(container)
        index = untag(index, self)
        plain_value = [untag(v, self) for v in value]
        self._save_before_write(array)
        before = array.copy()
        self.fallback(fn, array, index, *plain_value)
        value_node = self._node(value[0]) if value else None
        node = _Node()
        entry = _Entry(_write, [before, index, *plain_value], {}, array, [old_node, None,
                                                                          value_node], node)
        self.tape.append(entry)
        self._set_version(array, node)
        return None

    def _write_inplace(self, fn: Any, target: Any, other: Any) -> Any:
        """``a += b`` on an array: recorded as ``a = a + b``, the array object kept."""
        array = untag(target, self)
        pure = _INPLACE[fn]
        inputs = [self._node(target), self._node(other)]
        plain_other = untag(other, self)
        self._save_before_write(array)
        before = array.copy()
        self.fallback(fn, array, plain_other)
        node = _Node()
        self.tape.append(_Entry(pure, [before, plain_other], {}, array.copy(), inputs, node))
        self._set_version(array, node)
        return array

    def _write_out(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        """``np.add(a, b, out=c)``: ``c`` gets the new value (and node); recorded without out."""
        target = kwargs["out"]
        target = target[0] if isinstance(target, tuple) else target
        rest = {k: v for k, v in kwargs.items() if k != "out"}
        result = self.execute(fn, *args, **rest)
        array = untag(target, self)
        self._save_before_write(array)
        self.fallback(np.copyto, array, untag(result, self))
        self._set_version(array, self._node(result))
        return array

    def _attribute(self, obj: Any, name: str, *default: Any) -> Any:
        if name in _ATTRIBUTES:
            return self.execute(_ATTRIBUTES[name], obj)
        plain = untag(obj, self)
        method = getattr(type(plain), name, None)
        if callable(method) and (_rules.vjp_rules(method) is not None
                                 or _rules.is_nondifferentiable(method)):
            return _BoundRule(method, obj)
        return getattr(plain, name, *default)


class _BoundRule:
    """``x.sum`` on a differentiated array: the method descriptor, with ``x`` bound."""

    __slots__ = ("method", "obj")

    def __init__(self, method: Any, obj: Any) -> None:
        self.method, self.obj = method, obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.method(self.obj, *args, **kwargs)


def _write(before: np.ndarray, index: Any, value: Any = None) -> np.ndarray:
    out = before.copy()
    out[index] = value
    return out


def _write_ct_array(ct: Any, out: Any, before: Any, index: Any, value: Any = None) -> Any:
    kept = np.array(ct, copy=True)
    kept[index] = 0
    return kept


def _write_ct_value(ct: Any, out: Any, before: Any, index: Any, value: Any) -> Any:
    return np.asarray(ct)[index]


_rules.defvjp(_write, _write_ct_array, _rules.ZERO, _write_ct_value)
_rules.defjvp(_write, lambda dx, out, before, index, value=None: _write(dx, index, 0.0),
              _rules.ZERO, lambda dv, out, before, index, value: _write(
                  np.zeros(np.shape(dv)[:np.ndim(dv) - np.ndim(value)] + np.shape(before)),
                  (Ellipsis, index) if np.ndim(dv) > np.ndim(value) else index, dv))


# -- the backward sweep --------------------------------------------------------------------

def _unbroadcast(ct: Any, x: Any) -> Any:
    """``ct`` summed to ``x``'s shape (broadcast dimensions), real if ``x`` is real."""
    shape = np.shape(x)
    if np.shape(ct) != shape:
        extra = np.ndim(ct) - len(shape)
        if extra > 0:
            ct = np.sum(ct, axis=tuple(range(extra)))
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and np.shape(ct)[i] != 1)
        if axes:
            ct = np.sum(ct, axis=axes, keepdims=True)
        ct = np.reshape(ct, shape)
    if np.iscomplexobj(ct) and not np.iscomplexobj(x):
        ct = np.real(ct)
    return ct


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, list):
        return [_add(x, y) for x, y in zip(a, b)]
    return a + b


def _backward(tape: list, cts: dict) -> dict:
    """Send the output cotangents in ``cts`` (node -> cotangent) back through ``tape``."""
    for entry in reversed(tape):
        outputs = entry.outputs
        if isinstance(outputs, (tuple, list)):
            ct = type(outputs)(cts.pop(n, None) if n is not None else None for n in outputs)
            if all(c is None for c in ct):
                continue
        else:
            ct = cts.pop(outputs, None)
            if ct is None:
                continue
        if entry.joint is not None:
            parts = entry.joint(ct)
            for node, part, x in zip(entry.inputs, parts, entry.primals):
                if node is not None and part is not None:
                    cts[node] = _add(cts.get(node), _unbroadcast(part, x))
            continue
        rules = _rules.vjp_rules(entry.fn)
        for i, node in enumerate(entry.inputs):
            if node is None or rules[i] is _rules.ZERO:
                continue
            part = rules[i](ct, entry.out, *entry.primals, **entry.kwargs)
            if isinstance(node, list):
                for j, (n, p) in enumerate(zip(node, part)):
                    if n is not None and p is not None:
                        cts[n] = _add(cts.get(n), _unbroadcast(p, entry.primals[i][j]))
            else:
                cts[node] = _add(cts.get(node), _unbroadcast(part, entry.primals[i]))
    return cts


def _pull(ctx: "ReverseContext", out: Any, ct: Any, nodes: dict, argnums: tuple) -> tuple:
    cts = _backward(ctx.tape, _output_cotangents(ctx, out, ct))
    return _gradients(ctx, nodes, argnums, cts)


def _sweep(ctx: "ReverseContext", out: Any, ct: Any, nodes: dict, argnums: tuple) -> tuple:
    """The backward sweep, from output cotangent to input gradients, run under whatever context
    encloses this call (a bare context forwards everything it runs to its parent), so that an
    enclosing derivative differentiates it.  Everything it reads, it reads inside that run
    (an enclosing context keeps its metadata for values stored in the heap)."""
    return overdub(Context(), _pull, ctx, out, ct, nodes, argnums)


# -- the public API ------------------------------------------------------------------------

def _seed(ctx: ReverseContext, x: Any) -> tuple[Any, Any]:
    if not isinstance(untag_all(x), (numbers.Number, np.ndarray, np.generic)):
        raise TypeError(f"cannot differentiate with respect to a {type(x).__name__} (expected "
                        f"floats, complex numbers or arrays)")
    node = _Node()
    return tag(x, ctx, node), node


def untag_all(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x


def _zeros_like(x: Any) -> Any:
    plain = untag_all(x)
    if isinstance(plain, np.ndarray):
        return np.zeros_like(plain, dtype=np.result_type(plain, float))
    return 0.0 * plain if isinstance(plain, complex) else 0.0


def _forward(f: Callable, args: tuple, kwargs: dict, argnums: tuple) -> tuple:
    ctx = ReverseContext()
    args = list(args)
    nodes: dict[int, tuple] = {}
    for num in argnums:
        leaves, tree = flatten(args[num])
        seeded = [_seed(ctx, x) for x in leaves]
        args[num] = unflatten(tree, [s[0] for s in seeded])
        nodes[num] = (leaves, tree, [s[1] for s in seeded])
    out = overdub(ctx, f, *args, **kwargs)
    return ctx, out, nodes


def _gradients(ctx: ReverseContext, nodes: dict, argnums: tuple, cts: dict) -> tuple:
    # Built with displays and comprehensions, never list.append: under an enclosing context a
    # stored value's metadata lives in that context's shadow, which the caller cannot read.
    return tuple([unflatten(nodes[num][1], [_cast(cts[n], x) if n in cts else _zeros_like(x)
                                            for n, x in zip(nodes[num][2], nodes[num][0])])
                  for num in argnums])


def _cast(ct: Any, x: Any) -> Any:
    """A cotangent in the type of its input: a float for a float, an array for an array."""
    plain = untag_all(x)
    if isinstance(plain, (float, int)) and not isinstance(plain, bool) and \
            type(ct) is not Tagged and np.ndim(ct) == 0:
        return float(np.real(ct))
    if isinstance(plain, complex) and type(ct) is not Tagged and np.ndim(ct) == 0:
        return complex(ct)
    return ct


def _output_cotangents(ctx: ReverseContext, out: Any, ct: Any) -> dict:
    leaves, tree = flatten(out)
    ct_leaves, ct_tree = flatten(ct)
    if len(leaves) != len(ct_leaves):
        raise ValueError(f"pullback: the cotangent's structure {ct_tree} does not match the "
                         f"output's {tree}")
    cts: dict = {}
    for y, c in zip(leaves, ct_leaves):
        node = ctx._node(y)
        if node is not None:
            cts[node] = _add(cts.get(node), c)
    return cts


def _plain_out(ctx: ReverseContext, out: Any) -> Any:
    leaves, tree = flatten(out)
    return unflatten(tree, [untag(y, ctx) for y in leaves])


@opaque
def vjp(f: Callable, *primals: Any) -> tuple:
    """``(f(*primals), pullback)``; ``pullback(ct)`` gives the cotangent of every primal.

    Primals and the output are pytrees of floats, complex numbers and arrays.  The tape lives
    as long as ``pullback`` does.

    Example::

        out, pullback = vjp(lambda x: np.sin(x) * 2, np.ones(3))
        pullback(np.ones(3))   # (2 * cos(1) * ones(3),)

    See also: :func:`grad`, :func:`jacrev`, :func:`overdub_ad.jvp`.
    """
    if not callable(f):
        raise TypeError(f"vjp: f must be callable, got {f!r}")
    argnums = tuple(range(len(primals)))
    ctx, out, nodes = _forward(f, primals, {}, argnums)
    plain = _plain_out(ctx, out)

    @opaque
    def pullback(ct: Any) -> tuple:
        return _sweep(ctx, out, ct, nodes, argnums)

    return plain, pullback


def _normalize_argnums(argnums: Any, n: int) -> tuple:
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    for num in nums:
        if not isinstance(num, int) or not -n <= num < n:
            raise ValueError(f"argnums {argnums!r} out of range for {n} positional arguments")
    return tuple(num % n for num in nums)


@opaque
def value_and_grad(f: Callable, argnums: int | tuple = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Callable:
    """A function returning ``(f(*args), grad)`` (``((value, aux), grad)`` with ``has_aux``)."""
    if not callable(f):
        raise TypeError(f"value_and_grad: f must be callable, got {f!r}")

    @opaque
    def value_and_gradient(*args: Any, **kwargs: Any) -> tuple:
        nums = _normalize_argnums(argnums, len(args))
        ctx, out, nodes = _forward(f, args, kwargs, nums)
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("has_aux=True: f must return a pair (output, auxiliary data)")
            out, aux = out
        value = untag(out, ctx)
        if isinstance(untag_all(value), (tuple, list, dict)) or np.ndim(untag_all(value)) != 0:
            raise TypeError(f"grad requires a scalar output, got shape "
                            f"{np.shape(untag_all(value))}; use jacrev for a Jacobian or vjp "
                            f"for a vector-Jacobian product")
        if np.iscomplexobj(untag_all(value)) and not holomorphic:
            raise TypeError("grad of a complex-valued function: pass holomorphic=True for the "
                            "complex derivative, or take the real part")
        grads = _sweep(ctx, out, 1.0 + 0.0 * untag_all(value), nodes, nums)
        if holomorphic:
            grads = tuple(_conj_tree(g) for g in grads)
        result = grads if isinstance(argnums, tuple) else grads[0]
        return ((value, _plain_out(ctx, aux)), result) if has_aux else (value, result)

    return value_and_gradient


def _conj_tree(tree: Any) -> Any:
    leaves, treedef = flatten(tree)
    return unflatten(treedef, [np.conj(x) if np.iscomplexobj(x) else x for x in leaves])


@opaque
def grad(f: Callable, argnums: int | tuple = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable:
    """The gradient of scalar-valued ``f`` with respect to argument(s) ``argnums``.

    For real-valued ``f`` of complex ``z = x + iy`` the gradient is ``df/dx - i df/dy`` (JAX's
    and autograd's convention; PyTorch returns its conjugate).  ``holomorphic=True`` gives the
    complex derivative of a holomorphic ``f``.

    Example::

        grad(lambda x: np.sum(np.sin(x)))(np.zeros(3))   # ones(3)
    """
    value_and_gradient = value_and_grad(f, argnums, has_aux, holomorphic)

    @opaque
    def gradient(*args: Any, **kwargs: Any) -> Any:
        out = value_and_gradient(*args, **kwargs)
        return (out[1], out[0][1]) if has_aux else out[1]

    return gradient


@opaque
def jacrev(f: Callable, argnums: int | tuple = 0) -> Callable:
    """The Jacobian of ``f`` by reverse mode: one pullback per output element.

    Shape ``out.shape + x.shape`` (JAX's convention); ``jacobian`` is the same function.
    """
    if not callable(f):
        raise TypeError(f"jacrev: f must be callable, got {f!r}")

    @opaque
    def jacobian(*args: Any) -> Any:
        nums = _normalize_argnums(argnums, len(args))
        ctx, out, nodes = _forward(f, args, {}, nums)
        plain = np.asarray(untag(out, ctx))
        rows = []
        for k in range(plain.size):
            basis = np.zeros(plain.size, dtype=plain.dtype if plain.dtype.kind in "fc" else float)
            basis[k] = 1.0
            ct = basis.reshape(plain.shape) if plain.ndim else basis[0]
            rows.append(_sweep(ctx, out, ct, nodes, nums))
        results = []
        for i, num in enumerate(nums):
            x = np.asarray(untag_all(args[num]))
            stacked = np.stack([np.asarray(r[i]) for r in rows]) if rows else np.zeros((0,) + x.shape)
            results.append(stacked.reshape(plain.shape + x.shape))
        return tuple(results) if isinstance(argnums, tuple) else results[0]

    return jacobian


jacobian = jacrev


@opaque
def hessian(f: Callable, argnums: int = 0) -> Callable:
    """The Hessian of scalar ``f``: forward-over-reverse (``jacfwd(grad(f))``)."""
    from ._forward import jacfwd
    return jacfwd(grad(f, argnums), argnums)


@opaque
def hvp(f: Callable, x: Any, v: Any) -> Any:
    """``H(x) @ v`` for scalar ``f``, by forward-over-reverse without forming ``H``."""
    from ._forward import jvp
    return jvp(grad(f), (x,), (v,))[1]


class custom_vjp:
    """A function with a user-defined reverse rule (JAX's API).

    Example::

        @custom_vjp
        def f(x): return np.sin(x)
        def f_fwd(x): return np.sin(x), np.cos(x)
        def f_bwd(cos_x, ct): return (ct * cos_x,)
        f.defvjp(f_fwd, f_bwd)
    """

    def __init__(self, fn: Callable) -> None:
        if not callable(fn):
            raise TypeError(f"custom_vjp: {fn!r} is not callable")
        self.fn = fn
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", "custom_vjp")

    def defvjp(self, fwd: Callable, bwd: Callable) -> "custom_vjp":
        if not (callable(fwd) and callable(bwd)):
            raise TypeError("custom_vjp.defvjp(fwd, bwd): both must be callable")
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


@opaque
def checkpoint(f: Callable) -> Callable:
    """``f`` that stores nothing on the tape but its inputs: the backward pass recomputes it.

    Trades time for memory (gradient checkpointing): a 100-layer network's gradient keeps one
    layer's intermediates at a time instead of all of them.
    """
    if not callable(f):
        raise TypeError(f"checkpoint: {f!r} is not callable")
    checkpointed = custom_vjp(f)

    def fwd(*args: Any) -> tuple:
        return f(*args), args

    def bwd(args: tuple, ct: Any) -> tuple:
        return vjp(f, *args)[1](ct)

    checkpointed.defvjp(fwd, bwd)
    return checkpointed
