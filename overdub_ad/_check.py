"""Numerical checks of registered derivative rules, without any AD engine.

``check_rule(fn, *args, **kwargs)`` calls ``fn``'s rules from the tables in
:mod:`overdub_ad._rules` directly and compares them with finite differences:

- forward rules: each differentiable argument is moved along a random direction ``v``; the rule's
  tangent must match a fourth-order central difference, must have exactly the shape
  ``B + shape(out)``, and (``batch=True``) pushing a stack of two directions at once (a leading
  batch dimension) must give the stack of the two tangents;
- reverse rules: the dot-product test ``pair(vjp(ct), v) == pair(ct, jvp(v))`` for random ``ct``
  and ``v``, with the forward rule's tangent for ``jvp(v)`` (the finite difference when only
  reverse mode is checked).  ``pair(a, b) = Re(sum(a * b))`` -- the bilinear pairing that makes a
  reverse rule the plain *transpose* of the forward one, which is the autograd/JAX complex
  convention (the gradient of a real ``f`` at ``z = x + iy`` is ``df/dx - i df/dy``).  In terms of
  the real inner product of real and imaginary parts it reads
  ``<conj(vjp(ct)), v> == <conj(ct), jvp(v)>``.  The cotangent of a real argument is taken
  real, and broadcast dimensions are summed away, as the engine does;
- an argument marked ``ZERO`` that is a float must have a zero finite difference at the point;
- a nondifferentiable function is just called.

Arguments that are integers, booleans, strings or None are parameters, never differentiated.
A container argument (a list of arrays) is differentiated element by element at once.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from ._rules import LINEAR, ZERO, is_nondifferentiable, jvp_rules, vjp_rules, _name

__all__ = ["check_rule", "RuleCheckError"]


class RuleCheckError(AssertionError):
    """A derivative rule disagrees with finite differences or with its sibling rule."""


# -- trees of arrays ------------------------------------------------------------------------

def _is_leaf(x: object) -> bool:
    return not isinstance(x, (list, tuple))


def _leaves(x: Any) -> list[Any]:
    if _is_leaf(x):
        return [x]
    return [leaf for item in x for leaf in _leaves(item)]


def _map(f: Callable[..., Any], *xs: Any) -> Any:
    if _is_leaf(xs[0]):
        return f(*xs)
    items = [_map(f, *parts) for parts in zip(*xs)]
    return type(xs[0])(*items) if hasattr(xs[0], "_fields") else type(xs[0])(items)


def _inexact(x: Any) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (float, complex, np.floating, np.complexfloating)):
        return True
    if isinstance(x, np.ndarray):
        return np.issubdtype(x.dtype, np.inexact)
    return False


def _differentiable(x: Any) -> bool:
    if _is_leaf(x):
        return _inexact(x)
    return len(x) > 0 and any(_differentiable(item) for item in x)


def _copy(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.copy(order="K")  # keeps the memory layout (order="A" reads it)
    if isinstance(x, (list, tuple)):
        return _map(lambda leaf: leaf.copy() if isinstance(leaf, np.ndarray) else leaf, x)
    return copy.copy(x) if isinstance(x, (dict, set)) else x


def _call(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    return fn(*[_copy(a) for a in args], **kwargs)


def _random_like(rng: np.random.Generator, x: Any, batch: tuple[int, ...] = ()) -> Any:
    """A random direction (tangent) for a leaf ``x``, with leading ``batch`` dimensions."""
    if not _inexact(x):
        return None
    shape = tuple(batch) + np.shape(x)
    v = rng.standard_normal(shape)
    if np.iscomplexobj(x):
        v = v + 1j * rng.standard_normal(shape)
    if not shape and _is_number(x):
        return complex(v) if np.iscomplexobj(x) else float(v)
    return v


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, np.generic)


def _direction(rng: np.random.Generator, x: Any, batch: tuple[int, ...] = ()) -> Any:
    return _map(lambda leaf: _random_like(rng, leaf, batch), x)


def _step(x: Any, v: Any, h: float) -> Any:
    return _map(lambda leaf, d: leaf if d is None else leaf + h * d, x, v)


def _as_array(x: Any) -> Any:
    return np.asarray(x)


def _float_out(o: Any) -> bool:
    return _inexact(o) or (isinstance(o, np.ndarray) and np.issubdtype(o.dtype, np.inexact))


def _sub(a: Any, b: Any) -> Any:
    return _map(lambda p, q: (np.asarray(p) - np.asarray(q)) if _float_out(p) else None, a, b)


def _fd(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], i: int, v: Any,
        h: float) -> Any:
    """Fourth-order central difference of ``fn`` along ``v`` in argument ``i``."""
    def at(t: Any) -> Any:
        moved = list(args)
        moved[i] = _step(args[i], v, t)
        return _call(fn, moved, kwargs)
    f2, f1, m1, m2 = at(2 * h), at(h), at(-h), at(-2 * h)

    def combine(a: Any, b: Any, c: Any, d: Any) -> Any:
        if not _float_out(a):
            return None
        a, b, c, d = (np.asarray(t) for t in (a, b, c, d))
        return (-a + 8 * b - 8 * c + d) / (12 * h)
    return _map(combine, f2, f1, m1, m2)


def _tree_leaves_with(ref: Any, tree: Any) -> Any:
    """Leaves of ``tree`` aligned with those of ``ref``; ``None`` stands for a zero subtree."""
    if _is_leaf(ref):
        return [tree]
    if tree is None:
        return [None] * len(_leaves(ref))
    if _is_leaf(tree) or len(tree) != len(ref):
        raise RuleCheckError(f"structure mismatch: expected {len(ref)} components, got "
                             f"{type(tree).__name__}")
    return [leaf for r, t in zip(ref, tree) for leaf in _tree_leaves_with(r, t)]


def _norm(x: Any) -> float:
    if x is None:
        return 0.0
    a = np.abs(np.asarray(x, dtype=complex if np.iscomplexobj(x) else float))
    return float(np.max(a)) if a.size else 0.0


class _Case:
    def __init__(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                 rtol: float, atol: float, eps: float, outputs: Sequence[int] | None) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.rtol, self.atol, self.eps = rtol, atol, eps
        self.outputs = outputs
        self.name = _name(fn)
        self.out = _call(fn, args, kwargs)
        self.out_leaves = _leaves(self.out)
        self.fscale = max([_norm(o) for o in self.out_leaves if _float_out(o)] + [0.0])

    def fail(self, msg: str) -> NoReturn:
        raise RuleCheckError(f"{self.name}: {msg}")

    def selected(self, k: int) -> bool:
        return self.outputs is None or k in self.outputs

    def tol(self, scale: float) -> float:
        # roundoff of the finite difference grows like |f| * machine-eps / eps
        return self.atol + self.rtol * scale + 64 * np.finfo(float).eps * self.fscale / self.eps

    def compare(self, what: str, got: Any, want: Any, batch: tuple[int, ...] = ()) -> None:
        """``got`` (a tangent tree) against ``want`` (leaves may be None = zero)."""
        gl = _tree_leaves_with(self.out, got)
        wl = _tree_leaves_with(self.out, want)
        for k, (g, w, o) in enumerate(zip(gl, wl, self.out_leaves)):
            if not self.selected(k):
                continue
            if not _float_out(o):
                if g is not None and _norm(g) != 0:
                    self.fail(f"{what}: nonzero tangent for the integer output {k}")
                continue
            shape = tuple(batch) + np.shape(o)
            if g is not None and np.shape(g) != shape:
                self.fail(f"{what}: tangent of output {k} has shape {np.shape(g)}, "
                          f"expected {shape}")
            if g is not None and not np.iscomplexobj(o) and np.iscomplexobj(g) \
                    and _norm(np.imag(g)) > self.tol(_norm(g)):
                self.fail(f"{what}: complex tangent for the real output {k}")
            err = _norm(None if g is None and w is None else
                        (np.asarray(0.0 if g is None else g) - (0.0 if w is None else w)))
            scale = max(_norm(g), _norm(w))
            if not np.isfinite(err) or err > self.tol(scale):
                self.fail(f"{what}: output {k} differs by {err:.3g} (scale {scale:.3g})\n"
                          f"got  {np.asarray(g)!r}\nwant {np.asarray(w)!r}")


def _pair(a: Any, b: Any) -> complex:
    if a is None or b is None:
        return 0.0
    return complex(np.sum(np.asarray(a) * np.asarray(b)))


def _pair_trees(ref: Any, a: Any, b: Any, only: Callable[[int], bool] | None = None) -> float:
    al = _tree_leaves_with(ref, a)
    bl = _tree_leaves_with(ref, b)
    return sum(_pair(p, q).real for k, (p, q) in enumerate(zip(al, bl))
               if only is None or only(k))


def check_rule(fn: Callable[..., Any], *args: Any, modes: Sequence[str] = ("fwd", "rev"),
               batch: bool = True, eps: float = 1e-5, rtol: float = 1e-6, atol: float = 1e-9,
               wrt: Sequence[int] | None = None, outputs: Sequence[int] | None = None,
               seed: int = 0, **kwargs: Any) -> None:
    """Check ``fn``'s registered derivative rules at ``fn(*args, **kwargs)`` numerically.

    ``modes`` picks forward (``"fwd"``) and/or reverse (``"rev"``) rules; ``wrt`` restricts the
    checked arguments (positions); ``outputs`` restricts the outputs compared with finite
    differences for a function with several (positions in its flattened output tree: e.g.
    ``outputs=(0,)`` for ``np.linalg.eigh`` of a complex matrix, whose eigenvectors have an
    arbitrary phase); the dot-product test still covers every output against the forward rule.
    ``eps`` is the finite-difference step, ``rtol``/``atol`` the tolerances.  Raises
    :class:`RuleCheckError` on a mismatch, returns None when every rule agrees.

    Example::

        check_rule(np.sin, np.linspace(0.1, 1.0, 5))
        check_rule(np.linalg.eigh, A_hermitian, outputs=(0,))

    See also: ``overdub_ad._rules`` (the tables), ``tests/test_rules.py`` (the sweep).
    """
    if is_nondifferentiable(fn):
        _call(fn, args, kwargs)
        return
    jv = jvp_rules(fn)
    vj = vjp_rules(fn) or ()  # registered with jv: a tuple whenever jv is one
    if jv is None:
        raise RuleCheckError(f"{_name(fn)} has no registered rules")
    rng = np.random.default_rng(seed)
    case = _Case(fn, args, kwargs, rtol, atol, eps, outputs)
    positions = range(len(args)) if wrt is None else wrt
    checked = 0
    for i in positions:
        x = args[i]
        if not _differentiable(x):
            continue
        fwd: Any = jv[i] if i < len(jv) else None  # a rule, ZERO, LINEAR or None
        rev: Any = vj[i] if i < len(vj) else None
        if fwd is ZERO or rev is ZERO:
            if (fwd not in (ZERO, None)) or (rev not in (ZERO, None)):
                case.fail(f"argument {i} is ZERO in one mode only")
            v = _direction(rng, x)
            fd = _fd(fn, args, kwargs, i, v, eps)
            case.compare(f"argument {i} (ZERO) finite difference", None, fd)
            continue
        if "fwd" in modes and fwd is None:
            case.fail(f"no forward rule for the differentiable argument {i}")
        if "rev" in modes and rev is None:
            case.fail(f"no reverse rule for the differentiable argument {i}")
        checked += 1

        def push(v: Any, fwd: Any = fwd, i: int = i) -> Any:
            if fwd is LINEAR:
                moved = list(args)
                moved[i] = v
                return fn(*moved, **kwargs)
            return fwd(v, case.out, *args, **kwargs)

        v = _direction(rng, x)
        fd = _fd(fn, args, kwargs, i, v, eps)
        tangent = None
        if "fwd" in modes:
            tangent = push(v)
            case.compare(f"forward rule for argument {i}", tangent, fd)
            if batch:
                vb = _direction(rng, x, (2,))
                tb = push(vb)
                for leaf, o in zip(_tree_leaves_with(case.out, tb), case.out_leaves):
                    if leaf is not None and _float_out(o) and \
                            np.shape(leaf) != (2,) + np.shape(o):
                        case.fail(f"forward rule for argument {i} with a batch of 2: tangent "
                                  f"of shape {np.shape(leaf)}, expected {(2,) + np.shape(o)}")
                for k in range(2):
                    vk = _map(lambda leaf, ref, k=k: None if leaf is None else
                              (leaf[k].item() if _is_number(ref) else leaf[k]), vb, x)
                    want = _map(lambda leaf: None if leaf is None else np.asarray(leaf), push(vk))
                    got = _tree_leaves_with(case.out, tb)
                    _tree_leaves_with(case.out, want)  # structure check
                    case.compare(f"forward rule for argument {i} with a batch of 2",
                                 _slice_tree(case.out, tb, k, got), want)
                    fdk = _fd(fn, args, kwargs, i, vk, eps)
                    case.compare(f"forward rule for argument {i} with a batch of 2 (vs fd)",
                                 _slice_tree(case.out, tb, k, got), fdk)
        if "rev" in modes and any(_float_out(o) for o in case.out_leaves):
            for trial in range(2):
                if trial:
                    v = _direction(rng, x)
                    fd = _fd(fn, args, kwargs, i, v, eps)
                    tangent = push(v) if "fwd" in modes else None
                # against the forward rule every output counts (outputs= only spares the
                # finite differences of gauge-dependent outputs); against fd, the selected
                everything = tangent is not None
                lin = fd if tangent is None else tangent
                ct = _cotangent(rng, case, everything)
                g = rev(ct, case.out, *args, **kwargs)
                g = _reduce_like(case, x, g, i)
                lhs = _pair_trees(x, g, v)
                rhs = _pair_trees(case.out, ct, lin, only=None if everything else case.selected)
                scale = (_tree_norm(x, g) * _tree_norm(x, v)
                         + _tree_norm(case.out, ct) * _tree_norm(case.out, lin)) * max(
                    1, np.sqrt(sum(np.size(leaf) for leaf in _leaves(case.out))))
                if not np.isfinite(lhs - rhs) or abs(lhs - rhs) > case.tol(scale):
                    case.fail(f"reverse rule for argument {i} fails the dot-product test: "
                              f"<vjp(ct), v> = {lhs!r}, <ct, jvp(v)> = {rhs!r}")
    if checked == 0 and wrt is None and not any(
            _differentiable(a) and i < len(jv) and jv[i] is ZERO for i, a in enumerate(args)):
        case.fail("no differentiable argument was checked")


def _slice_tree(ref: Any, tree: Any, k: int, leaves: Any) -> Any:
    """The ``k``-th batch slice of a batched tangent tree (None stays None)."""
    sliced = [None if leaf is None else np.asarray(leaf)[k] for leaf in leaves]
    if _is_leaf(ref):
        return sliced[0]
    it = iter(sliced)

    def build(r: Any) -> Any:
        if _is_leaf(r):
            return next(it)
        return [build(item) for item in r]
    return build(ref)


def _tree_norm(ref: Any, tree: Any) -> float:
    return float(np.sqrt(sum(_norm(leaf) ** 2 for leaf in _tree_leaves_with(ref, tree))))


def _cotangent(rng: np.random.Generator, case: _Case, everything: bool = False) -> Any:
    """A random cotangent for the output; integer (and unselected) outputs get None."""
    leaves = []
    for k, o in enumerate(case.out_leaves):
        pick = _float_out(o) and (everything or case.selected(k))
        leaves.append(_random_like(rng, o) if pick else None)
    if _is_leaf(case.out):
        return leaves[0]
    it = iter(leaves)

    def build(r: Any) -> Any:
        if _is_leaf(r):
            return next(it)
        items = [build(item) for item in r]
        return tuple(items) if isinstance(r, tuple) else items
    return build(case.out)


def _unbroadcast(g: Any, shape: Any) -> Any:
    """``g`` summed down to ``shape`` (leading extra dimensions and broadcast size-1 ones)."""
    if g.shape == tuple(shape):
        return g
    extra = g.ndim - len(shape)
    if extra < 0:
        raise ValueError("cotangent has fewer dimensions than its argument")
    if extra:
        g = np.sum(g, axis=tuple(range(extra)))
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    if g.shape != tuple(shape):
        raise ValueError("cotangent shape does not reduce to the argument's")
    return g


def _reduce_like(case: _Case, x: Any, g: Any, i: int) -> Any:
    """The engine's treatment of a cotangent: broadcast dimensions summed, real for real x."""
    def one(leaf: Any, gl: Any) -> Any:
        if gl is None:
            return None
        if not _inexact(leaf):
            return None
        shape = np.shape(leaf)
        if not np.can_cast(np.asarray(gl).dtype, np.complex128):
            case.fail(f"reverse rule for argument {i} returned {np.asarray(gl).dtype}")
        try:
            gl = _unbroadcast(np.asarray(gl), shape)
        except (ValueError, IndexError):
            case.fail(f"reverse rule for argument {i}: cotangent of shape {np.shape(gl)} does "
                      f"not reduce to the argument's shape {shape}")
        return gl if np.iscomplexobj(leaf) else np.real(gl)
    reduced = iter([one(a, b) for a, b in zip(_leaves(x), _tree_leaves_with(x, g))])

    def build(r: Any) -> Any:
        if _is_leaf(r):
            return next(reduced)
        return [build(item) for item in r]
    return build(x)
