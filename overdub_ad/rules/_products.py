"""Rules for products: ``matmul`` (and ``@``), ``einsum`` and the products written with it
(``dot``, ``inner``, ``tensordot``), ``kron``, ``convolve``, ``outer``, ``vdot``, ``vecdot``,
``matvec``, ``vecmat`` and ``cross``.

They are the bilinear functions of arrays; ``np.linalg``'s inverses, solves and decompositions
are in ``_linalg``, whose matrix helpers (``_T``, ``_lift_to``) these rules share.

Abbreviations as in ``_linalg``: ``x, y`` arguments, ``out`` the primal output, ``d`` (``dx``) a
tangent with leading batch dimensions ``B``, ``ct`` a cotangent; ``_T`` swaps the last two axes.

Conventions (``_linalg``'s):

- Matrices may be stacked (``(..., m, n)``) wherever NumPy allows it; forward rules keep batch
  dimensions in front of the stack dimensions (they are lifted like broadcast dimensions).
- Complex: reverse rules are the *transposes* of the forward rules under ``Re(sum(a * b))``
  (autograd/JAX).  So ``vjp(a @ b)`` is ``ct @ b.T`` without conjugation.
- A product that is an ``einsum`` (``dot``, ``inner``, ``tensordot``) gets its rules from
  ``einsum``'s, given the subscripts of its arguments (``_spec_rules``).
"""

from __future__ import annotations

import operator
import string
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import ZERO, defjvp, defquick, defstandin, defvjp, same_rules
from ._common import bshape, eye, fit, indexed, lift, map_batch, nbatch, neg_axis
from ._linalg import _lift_to, _T


# -- matmul ---------------------------------------------------------------------------------

def _matmul_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
        arg = (x, y)[pos]
        nd_out = np.ndim(out) + (np.ndim(x) == 1) + (np.ndim(y) == 1)  # out as matrices
        if np.ndim(arg) == 1:  # a vector: make it a matrix, then lift it against out
            d = np.expand_dims(d, -2 if pos == 0 else -1)
            arg = np.expand_dims(arg, -2 if pos == 0 else -1)
        d = _lift_to(d, arg, nd_out)
        if pos == 0:
            t = np.matmul(d, y if np.ndim(y) > 1 else np.expand_dims(y, -1))
        else:
            t = np.matmul(x if np.ndim(x) > 1 else np.expand_dims(x, -2), d)
        if np.ndim(y) == 1:
            t = t[..., 0]
        if np.ndim(x) == 1:
            t = t[..., 0, :] if np.ndim(y) > 1 else t[..., 0]
        return t
    return rule


def _matmul_vjp_x(ct: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
    nx, ny = np.ndim(x), np.ndim(y)  # (each call is a dispatch under an enclosing context)
    if nx == 1 and ny == 1:
        return ct * y
    if ny == 1:
        return np.expand_dims(ct, -1) * y
    if nx == 1:
        return np.matmul(np.expand_dims(ct, -2), np.swapaxes(y, -1, -2))[..., 0, :]
    return np.matmul(ct, np.swapaxes(y, -1, -2))


def _matmul_vjp_y(ct: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
    nx, ny = np.ndim(x), np.ndim(y)
    if nx == 1 and ny == 1:
        return ct * x
    if nx == 1:
        return np.expand_dims(x, -1) * np.expand_dims(ct, -2)
    if ny == 1:
        return np.matmul(np.swapaxes(x, -1, -2), np.expand_dims(ct, -1))[..., 0]
    return np.matmul(np.swapaxes(x, -1, -2), ct)


for _fn in (np.matmul, operator.matmul, operator.imatmul, getattr(np.linalg, "matmul", None)):
    if _fn is not None:
        defjvp(_fn, _matmul_jvp(0), _matmul_jvp(1))
        defvjp(_fn, _matmul_vjp_x, _matmul_vjp_y)


def _matmul_matrices_vjp_x(ct: Any, out: Any, /, x: Any, y: Any) -> Any:
    """The cotangent of the matrix ``x`` in ``x @ y`` for a matrix ``y``: the shipped rule's
    ``np.matmul(ct, np.swapaxes(y, -1, -2))``, without its cases for vectors and stacks."""
    return np.matmul(ct, y.T)


def _matmul_matrices_vjp_y(ct: Any, out: Any, /, x: Any, y: Any) -> Any:
    return np.matmul(x.T, ct)


def _matrices(mask: int, primals: list[Any], kwargs: dict[str, Any]) -> bool:
    """Two NumPy matrices, nothing else."""
    return not kwargs and len(primals) == 2 and \
        type(primals[0]) is np.ndarray and primals[0].ndim == 2 and \
        type(primals[1]) is np.ndarray and primals[1].ndim == 2


# a @ b of two matrices, the commonest product: reverse mode's quick rules
_MATMUL_MATRICES = (_matmul_matrices_vjp_x, _matmul_matrices_vjp_y)
for _fn in (operator.matmul, np.matmul):
    defquick(_fn, _matrices, _MATMUL_MATRICES)


# -- einsum and the products written with it --------------------------------------------------

_LETTERS = string.ascii_letters


def _explicit(subs: Any, shapes: Any, out: Any) -> Any:
    """Input and output subscripts with every ``...`` spelled out in fresh letters."""
    used = set("".join(subs) + (out or ""))
    free = [c for c in _LETTERS if c not in used]
    ell = 0
    for s, shape in zip(subs, shapes):
        if "..." in s:
            ell = max(ell, len(shape) - (len(s) - 3))
    ell_letters = "".join(free[:ell])
    spelled = []
    for s, shape in zip(subs, shapes):
        if "..." in s:
            k = len(shape) - (len(s) - 3)
            s = s.replace("...", ell_letters[ell - k:] if k else "")
        spelled.append(s)
    if out is None:  # implicit mode: broadcast dims, then the letters used once, sorted
        counts: dict[str, int] = {}
        for s in spelled:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters + "".join(sorted(c for c, n in counts.items()
                                           if n == 1 and c not in ell_letters))
    else:
        out = out.replace("...", ell_letters)
    return spelled, out, free[ell:]


def _sublist_letters(sub: Any) -> Any:
    return "".join("..." if s is Ellipsis else _LETTERS[s] for s in sub)


def _parse_einsum(args: Any) -> Any:
    """(explicit input subscripts, output subscripts, spare letters, operands, the position in
    ``args`` of each operand)."""
    if isinstance(args[0], str):
        spec = args[0].replace(" ", "")
        ins, out = spec.split("->") if "->" in spec else (spec, None)
        subs = ins.split(",")
        operands = list(args[1:])
        where = list(range(1, len(args)))
    else:  # einsum(op0, sublist0, op1, sublist1, ..., [sublistout])
        operands = list(args[0:len(args) - len(args) % 2:2])
        subs = [_sublist_letters(s) for s in args[1::2]]
        out = _sublist_letters(args[-1]) if len(args) % 2 else None
        where = list(range(0, 2 * len(operands), 2))
    subs, out, spare = _explicit(subs, [np.shape(o) for o in operands], out)
    return subs, out, spare, operands, where


def _einsum_jvp_core(subs: Any, out: Any, spare: Any, operands: Any, k: Any, d: Any,
                     optimize: Any = False) -> Any:
    nb = nbatch(d, operands[k])
    batch = "".join(spare[:nb])
    ops = list(operands)
    ops[k] = d
    s = list(subs)
    s[k] = batch + s[k]
    return np.einsum(",".join(s) + "->" + batch + out, *ops, optimize=optimize)


def _einsum_vjp_core(subs: Any, out: Any, spare: Any, operands: Any, k: Any, ct: Any,
                     optimize: Any = False) -> Any:
    target = subs[k]
    x = operands[k]
    shape = np.shape(x)
    others = [s for j, s in enumerate(subs) if j != k] + [out]
    others_ops = [o for j, o in enumerate(operands) if j != k] + [ct]
    avail = set("".join(others))
    unique = "".join(dict.fromkeys(target))
    kept = "".join(c for c in unique if c in avail)
    g = np.einsum(",".join(others) + "->" + kept, *others_ops, optimize=optimize)
    size = {c: shape[target.index(c)] for c in unique}
    # letters only in this operand were summed away in the primal: broadcast back
    g = np.reshape(g, tuple(np.shape(g)[kept.index(c)] if c in kept else 1 for c in unique))
    g = np.broadcast_to(g, tuple(np.shape(g)[i] if np.shape(g)[i] != 1 else size[c]
                                 for i, c in enumerate(unique)))
    if len(unique) != len(target):  # repeated letters: a diagonal of x, embed g in it
        spare_iter = iter(spare)
        seen, letters, eyes = set(), [], []
        for c in target:
            if c in seen:
                new = next(spare_iter)
                eyes.append((c + new, eye(size[c])))
                letters.append(new)
            else:
                seen.add(c)
                letters.append(c)
        g = np.einsum(",".join([unique] + [e[0] for e in eyes]) + "->" + "".join(letters), g,
                      *[e[1] for e in eyes])
    # size-1 dimensions of x that broadcast in the primal
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and np.shape(g)[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    return g


def _einsum_rule(i: int, mode: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
        subs, out_subs, spare, operands, where = _parse_einsum(args)
        k = where.index(i)
        opt = kwargs.get("optimize", False)
        if mode == "fwd":
            return _einsum_jvp_core(subs, out_subs, spare, operands, k, d, opt)
        return _einsum_vjp_core(subs, out_subs, spare, operands, k, d, opt)
    return rule


# string form: argument 0 (the subscripts) is never differentiated; interleaved form
# (op0, sublist0, op1, ...): the operands sit at even positions
defjvp(np.einsum, *indexed(lambda i: _einsum_rule(i, "fwd")))
defvjp(np.einsum, *indexed(lambda i: _einsum_rule(i, "rev")))


def _spec_rules(fn: Any, spec_of: Any, *rest: Any) -> None:
    """Rules of a bilinear ``fn(x, y, ...)`` that is ``einsum(spec_of(x, y, ...), x, y)``."""
    def jvp(pos: int) -> Callable[..., Any]:
        def rule(d: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
            subs, out_subs, spare = spec_of(x, y, *a, **k)
            if subs is None:  # a scalar operand: a plain product
                return fit(lift(d, (x, y)[pos], out) * (y, x)[pos], d, (x, y)[pos], out)
            return _einsum_jvp_core(subs, out_subs, spare, [x, y], pos, d)
        return rule

    def vjp(pos: int) -> Callable[..., Any]:
        def rule(ct: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
            subs, out_subs, spare = spec_of(x, y, *a, **k)
            if subs is None:
                return ct * (y, x)[pos]
            return _einsum_vjp_core(subs, out_subs, spare, [x, y], pos, ct)
        return rule
    defjvp(fn, jvp(0), jvp(1), *rest)
    defvjp(fn, vjp(0), vjp(1), *rest)


def _letters(n: Any, start: Any = 0) -> Any:
    return _LETTERS[start:start + n]


def _spare(used: Any) -> Any:
    return [c for c in _LETTERS if c not in used]


def _dot_spec(x: Any, y: Any, *a: Any, **k: Any) -> Any:
    nx, ny = np.ndim(x), np.ndim(y)
    if nx == 0 or ny == 0:
        return None, None, None
    xs = _letters(nx - 1) + "Z"
    if ny == 1:
        ys = "Z"
    else:
        ys = _letters(ny - 2, 20) + "Z" + _letters(1, 40)
    out = xs[:-1] + ys.replace("Z", "")
    return [xs, ys], out, _spare(xs + ys)


def _inner_spec(x: Any, y: Any, *a: Any, **k: Any) -> Any:
    nx, ny = np.ndim(x), np.ndim(y)
    if nx == 0 or ny == 0:
        return None, None, None
    xs = _letters(nx - 1) + "Z"
    ys = _letters(ny - 1, 20) + "Z"
    return [xs, ys], xs[:-1] + ys[:-1], _spare(xs + ys)


def _tensordot_spec(x: Any, y: Any, axes: Any = 2, **k: Any) -> Any:
    nx, ny = np.ndim(x), np.ndim(y)
    ax_x: list[Any]
    ax_y: list[Any]
    if isinstance(axes, (int, np.integer)):
        ax_x, ax_y = list(range(nx - axes, nx)), list(range(axes))
    else:
        ax_x, ax_y = axes
        ax_x = [ax_x] if isinstance(ax_x, (int, np.integer)) else list(ax_x)
        ax_y = [ax_y] if isinstance(ax_y, (int, np.integer)) else list(ax_y)
    xs = list(_letters(nx))
    ys = list(_letters(ny, 26))
    for i, j in zip(ax_x, ax_y):
        ys[j % ny] = xs[i % nx]
    out = [c for i, c in enumerate(xs) if i not in {a % nx for a in ax_x}] + \
          [c for j, c in enumerate(ys) if j not in {b % ny for b in ax_y}]
    return ["".join(xs), "".join(ys)], "".join(out), _spare(xs + ys)


_spec_rules(np.dot, _dot_spec)
_spec_rules(np.inner, _inner_spec)
_spec_rules(np.tensordot, _tensordot_spec, ZERO)
if hasattr(np.linalg, "tensordot"):  # NumPy 2
    _spec_rules(np.linalg.tensordot, _tensordot_spec)


def _kron_parts(x: Any, y: Any) -> Any:
    nd = max(np.ndim(x), np.ndim(y))
    sx = (1,) * (nd - np.ndim(x)) + np.shape(x)
    sy = (1,) * (nd - np.ndim(y)) + np.shape(y)
    xs, ys = _letters(nd), _letters(nd, 26)
    inter = "".join(a + b for a, b in zip(xs, ys))
    return sx, sy, xs, ys, inter


def _kron_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, x: Any, y: Any) -> Any:
        sx, sy, xs, ys, inter = _kron_parts(x, y)
        batch = bshape(d, (x, y)[pos])
        b = "".join(_spare(xs + ys)[:len(batch)])
        ops = [np.reshape(d, batch + sx), y] if pos == 0 else [x, np.reshape(d, batch + sy)]
        ops[1 - pos] = np.reshape(ops[1 - pos], (sy, sx)[pos])
        subs = [b + xs, ys] if pos == 0 else [xs, b + ys]
        t = np.einsum(",".join(subs) + "->" + b + inter, *ops)
        return np.reshape(t, batch + np.shape(out))
    return rule


def _kron_vjp(pos: int) -> Callable[..., Any]:
    def rule(ct: Any, out: Any, /, x: Any, y: Any) -> Any:
        sx, sy, xs, ys, inter = _kron_parts(x, y)
        c = np.reshape(ct, tuple(n for pair in zip(sx, sy) for n in pair))
        other = np.reshape((y, x)[pos], (sy, sx)[pos])
        g = np.einsum(inter + "," + (ys, xs)[pos] + "->" + (xs, ys)[pos], c, other)
        return np.reshape(g, np.shape((x, y)[pos]))
    return rule


defjvp(np.kron, _kron_jvp(0), _kron_jvp(1))
defvjp(np.kron, _kron_vjp(0), _kron_vjp(1))


# convolve(a, v, mode): bilinear; its output is a window of the full convolution, whose
# transpose in one argument is a valid-mode convolution with the other reversed
def _convolve_window(n: int, m: int, mode: str) -> tuple[int, int]:
    """(start, length) of np.convolve's output of 1-D arguments of sizes n, m in the full one."""
    if mode == "full":
        return 0, n + m - 1
    if mode == "same":
        return (min(n, m) - 1) // 2, max(n, m)
    return min(n, m) - 1, max(n, m) - min(n, m) + 1


def _convolve_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, a: Any, v: Any, mode: Any = "full") -> Any:
        if pos == 0:
            return map_batch(lambda t: np.convolve(t, v, mode), d, 1)
        return map_batch(lambda t: np.convolve(a, t, mode), d, 1)
    return rule


def _convolve_vjp(pos: int) -> Callable[..., Any]:
    def rule(ct: Any, out: Any, /, a: Any, v: Any, mode: Any = "full") -> Any:
        n, m = np.size(a), np.size(v)
        start, length = _convolve_window(n, m, mode)
        full = np.pad(ct, (start, n + m - 1 - start - length))
        other = (v, a)[pos]
        return np.convolve(full, np.flip(other), "valid")
    return rule


defjvp(np.convolve, _convolve_jvp(0), _convolve_jvp(1), ZERO)
defvjp(np.convolve, _convolve_vjp(0), _convolve_vjp(1), ZERO)


def _correlate(a: Any, v: Any, mode: Any = "valid") -> Any:
    """``np.correlate`` restated as the convolution it is, as NumPy computes it (the same
    bits): ``sum_n a[n + k] conj(v[n])``, the arguments swapped (and the output reversed) when
    ``v`` is the longer."""
    if np.size(a) >= np.size(v):
        return np.convolve(a, np.conj(v)[::-1], mode)
    return np.convolve(np.conj(v), a[::-1], mode)[::-1]


defstandin(np.correlate, _correlate)


def _coefficients(p: Any) -> Any:
    """What ``np.poly1d(p).coeffs`` holds, taken from ``p`` itself: its leading zeros
    dropped (one zero for all zeros)."""
    p = np.atleast_1d(p.coeffs if isinstance(p, np.poly1d) else p)
    nonzero = np.flatnonzero(p)  # (positions: no derivative)
    return p[int(nonzero[0]):] if len(nonzero) else p[-1:] * 0


def _polymul(a1: Any, a2: Any) -> Any:
    """``np.polymul`` restated: NumPy makes its arguments ``poly1d`` objects, whose
    coefficients it then reads natively (no derivative would reach the result), and convolves
    their coefficients; here the arrays' own coefficients are convolved, the same numbers.  A
    ``poly1d`` argument gives a ``poly1d``, as NumPy's does."""
    product = np.convolve(_coefficients(a1), _coefficients(a2))
    if isinstance(a1, np.poly1d) or isinstance(a2, np.poly1d):
        return np.poly1d(product)
    return product


defstandin(np.polymul, _polymul)


# outer(x, y) = ravel(x)[:, None] * ravel(y)[None, :]
def _outer_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
        batch = bshape(d, (x, y)[pos])
        if pos == 0:
            return np.reshape(d, batch + (-1, 1)) * np.ravel(y)
        return np.reshape(np.ravel(x), (-1, 1)) * np.reshape(d, batch + (1, -1))
    return rule


defjvp(np.outer, _outer_jvp(0), _outer_jvp(1))
defvjp(np.outer, lambda ct, out, /, x, y, *a, **k: np.reshape(ct @ np.ravel(y), np.shape(x)),
       lambda ct, out, /, x, y, *a, **k: np.reshape(np.ravel(x) @ ct, np.shape(y)))
if hasattr(np.linalg, "outer"):  # NumPy 2 (vectors only)
    defjvp(np.linalg.outer, _outer_jvp(0), _outer_jvp(1))
    defvjp(np.linalg.outer, lambda ct, out, /, x, y: ct @ y, lambda ct, out, /, x, y: x @ ct)


# vdot(x, y) = sum(conj(ravel(x)) * ravel(y))
def _vdot_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, x: Any, y: Any) -> Any:
        batch = bshape(d, (x, y)[pos])
        flat = np.reshape(d, batch + (-1,))
        if pos == 0:
            return np.sum(np.conj(flat) * np.ravel(y), axis=-1)
        return np.sum(np.conj(np.ravel(x)) * flat, axis=-1)
    return rule


defjvp(np.vdot, _vdot_jvp(0), _vdot_jvp(1))
defvjp(np.vdot, lambda ct, out, /, x, y: np.reshape(np.conj(ct * y), np.shape(x)),
       lambda ct, out, /, x, y: np.reshape(ct * np.conj(x), np.shape(y)))


# vecdot(x, y, axis) = sum(conj(x) * y, axis) ; matvec(A, v) = A @ v ; vecmat(v, A) = conj(v) @ A
def _vecdot_rules(fn: Any, keyword_only: Any) -> None:
    def jvp(pos: int) -> Callable[..., Any]:
        def rule(d: Any, out: Any, /, x: Any, y: Any, *a: Any, axis: Any = -1, **k: Any) -> Any:
            nd = max(np.ndim(x), np.ndim(y))
            dl = _lift_to(d, (x, y)[pos], nd)
            ax = neg_axis(axis, nd)
            t = np.sum(np.conj(dl) * y if pos == 0 else np.conj(x) * dl, axis=ax)
            return fit(t, d, (x, y)[pos], out)
        return rule

    def vjp(pos: int) -> Callable[..., Any]:
        def rule(ct: Any, out: Any, /, x: Any, y: Any, *a: Any, axis: Any = -1, **k: Any) -> Any:
            nd = max(np.ndim(x), np.ndim(y))
            c = np.expand_dims(ct, neg_axis(axis, nd))
            return np.conj(c * y) if pos == 0 else c * np.conj(x)
        return rule
    defjvp(fn, jvp(0), jvp(1))
    defvjp(fn, vjp(0), vjp(1))


for _fn in (getattr(np, "vecdot", None), getattr(np.linalg, "vecdot", None)):
    if _fn is not None:
        _vecdot_rules(_fn, True)

if hasattr(np, "matvec"):  # NumPy 2.2+
    def _matvec_jvp(pos: int) -> Callable[..., Any]:
        def rule(d: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
            arg = (x, y)[pos]
            dl = _lift_to(d, arg, np.ndim(out) + (1 if pos == 0 else 0) + (np.ndim(arg) == 1
                                                                              and pos == 0))
            return np.matvec(dl, y) if pos == 0 else np.matvec(x, dl)
        return rule

    def _vecmat_jvp(pos: int) -> Callable[..., Any]:
        def rule(d: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
            arg = (x, y)[pos]
            dl = _lift_to(d, arg, np.ndim(out) + (0 if pos == 0 else 1))
            return np.vecmat(dl, y) if pos == 0 else np.vecmat(x, dl)
        return rule

    defjvp(np.matvec, _matvec_jvp(0), _matvec_jvp(1))
    defvjp(np.matvec, lambda ct, out, /, x, y, *a, **k:
           np.expand_dims(ct, -1) * np.expand_dims(y, -2),
           lambda ct, out, /, x, y, *a, **k: np.matvec(_T(x), ct))
    defjvp(np.vecmat, _vecmat_jvp(0), _vecmat_jvp(1))
    defvjp(np.vecmat, lambda ct, out, /, x, y, *a, **k: np.conj(np.matvec(y, ct)),
           lambda ct, out, /, x, y, *a, **k:
           np.expand_dims(np.conj(x), -1) * np.expand_dims(ct, -2))


# cross(x, y): 3-vectors (and 2-vectors) along axisa of x and axisb of y, axisc of the
# output (all three ``axis`` when given): the rules move them last, and back
def _cross_axes(x: Any, y: Any, out: Any, a: Any, k: Any) -> tuple[int, int, int]:
    """The negative vector axes of x, y and out, from np.cross's positional or keyword
    ``axisa, axisb, axisc, axis``."""
    given = dict(zip(("axisa", "axisb", "axisc", "axis"), a), **k)
    axis = given.get("axis")
    ax, ay, ao = (axis,) * 3 if axis is not None else (
        given.get("axisa", -1), given.get("axisb", -1), given.get("axisc", -1))
    return neg_axis(ax, np.ndim(x)), neg_axis(ay, np.ndim(y)), neg_axis(ao, max(np.ndim(out), 1))


def _cross2(x: Any, y: Any) -> Any:
    return x[..., 0] * y[..., 1] - x[..., 1] * y[..., 0]


def _cross_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
        ax, ay, ao = _cross_axes(x, y, out, a, k)
        xl, yl = np.moveaxis(x, ax, -1), np.moveaxis(y, ay, -1)
        nd = max(np.ndim(x), np.ndim(y))
        dl = _lift_to(np.moveaxis(d, (ax, ay)[pos], -1), (x, y)[pos], nd)
        if np.shape(xl)[-1] == 2:
            t = _cross2(dl, yl) if pos == 0 else _cross2(xl, dl)
        else:
            t = np.moveaxis(np.cross(dl, yl) if pos == 0 else np.cross(xl, dl), -1, ao)
        return fit(t, d, (x, y)[pos], out)
    return rule


def _cross_vjp(pos: int) -> Callable[..., Any]:
    def rule(ct: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
        ax, ay, ao = _cross_axes(x, y, out, a, k)
        xl, yl = np.moveaxis(x, ax, -1), np.moveaxis(y, ay, -1)
        if np.shape(xl)[-1] == 2:  # ct * (x0 y1 - x1 y0)
            other = (yl, xl)[pos]
            sign = 1.0 if pos == 0 else -1.0
            g = sign * np.expand_dims(ct, -1) * np.stack([other[..., 1], -other[..., 0]], -1)
        else:  # ct . (dx x y) = dx . (y x ct) ; ct . (x x dy) = dy . (ct x x)
            cl = np.moveaxis(ct, ao, -1)
            g = np.cross(yl, cl) if pos == 0 else np.cross(cl, xl)
        return np.moveaxis(g, -1, (ax, ay)[pos])
    return rule


for _fn in (np.cross, getattr(np.linalg, "cross", None)):
    if _fn is not None:
        defjvp(_fn, _cross_jvp(0), _cross_jvp(1))
        defvjp(_fn, _cross_vjp(0), _cross_vjp(1))


# x.dot(y) is np.ndarray.dot(x, y)
same_rules(np.ndarray.dot, np.dot)
