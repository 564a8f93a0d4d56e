"""Rules for products and ``np.linalg``: matmul, dot, einsum, solve, inv, det, cholesky, eigh,
svd, qr, norm...

Abbreviations: ``a, b`` (``x, y``) arguments, ``out`` the primal output, ``dx`` a tangent with
leading batch dimensions ``B``, ``ct`` a cotangent; ``_T`` swaps the last two axes, ``_H`` also
conjugates.

Conventions:

- Matrices may be stacked (``(..., m, n)``) wherever NumPy allows it; forward rules keep batch
  dimensions in front of the stack dimensions (they are lifted like broadcast dimensions).
- Complex: reverse rules are the *transposes* of the forward rules under ``Re(sum(a * b))``
  (autograd/JAX).  So ``vjp(a @ b)`` is ``ct @ b.T`` without conjugation, and for the
  decompositions the rules are derived with the real inner product ``Re<A, B>`` and then
  conjugated (``g = conj(adjoint(conj(ct)))``).
- Decompositions are differentiated as NumPy computes them: ``cholesky`` and ``eigh`` read one
  triangle of their argument (lower by default), so their tangent sees only that triangle (the
  other is taken as its mirror) and their cotangent lives on it.  Eigen- and singular vectors
  of *complex* matrices have an arbitrary phase; the rules fix it as JAX does (no change of
  phase along the tangent), which is right for any phase-invariant use of the vectors.
- Repeated eigenvalues / singular values make vector derivatives infinite, as in every AD
  system; ``qr`` is supported for ``m >= n`` (reduced), ``svd`` for ``full_matrices=False`` or
  square matrices.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import LINEAR, ZERO, defjvp, defvjp, nondifferentiable, same_rules
from ._common import (bshape, cts, expand, fit, indexed, lift, map_batch, nbatch, neg_axes,
                      neg_axis)


def _T(a: Any) -> Any:
    return np.swapaxes(a, -1, -2)


def _H(a: Any) -> Any:
    return np.conj(np.swapaxes(a, -1, -2))


def _diag_embed(v: Any) -> Any:
    """The stacked diagonal matrices with diagonals ``v`` (..., n) -> (..., n, n)."""
    n = np.shape(v)[-1]
    return np.expand_dims(v, -1) * np.eye(n)


def _diag(a: Any) -> Any:
    return np.diagonal(a, 0, -2, -1)


def _lift_to(dx: Any, x: Any, nd: Any) -> Any:
    """``dx`` (tangent of ``x``) with 1s inserted after its batch dims to have ``nd`` dims
    besides the batch."""
    nb = nbatch(dx, x)
    s = np.shape(dx)
    return np.reshape(dx, s[:nb] + (1,) * (nd - np.ndim(x)) + s[nb:])


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
    if np.ndim(x) == 1 and np.ndim(y) == 1:
        return ct * y
    if np.ndim(y) == 1:
        return np.expand_dims(ct, -1) * y
    if np.ndim(x) == 1:
        return np.matmul(np.expand_dims(ct, -2), _T(y))[..., 0, :]
    return np.matmul(ct, _T(y))


def _matmul_vjp_y(ct: Any, out: Any, /, x: Any, y: Any, *a: Any, **k: Any) -> Any:
    if np.ndim(x) == 1 and np.ndim(y) == 1:
        return ct * x
    if np.ndim(x) == 1:
        return np.expand_dims(x, -1) * np.expand_dims(ct, -2)
    if np.ndim(y) == 1:
        return np.matmul(_T(x), np.expand_dims(ct, -1))[..., 0]
    return np.matmul(_T(x), ct)


for _fn in (np.matmul, operator.matmul, operator.imatmul, getattr(np.linalg, "matmul", None)):
    if _fn is not None:
        defjvp(_fn, _matmul_jvp(0), _matmul_jvp(1))
        defvjp(_fn, _matmul_vjp_x, _matmul_vjp_y)


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
                eyes.append((c + new, np.eye(size[c])))
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


# -- trace over the last two axes (NumPy 2's np.linalg.trace) ----------------------------------

if hasattr(np.linalg, "trace"):
    defjvp(np.linalg.trace, lambda dx, out, /, x, *, offset=0, dtype=None:
           np.trace(dx, offset, -2, -1))
    defvjp(np.linalg.trace, lambda ct, out, /, x, *, offset=0, dtype=None:
           np.reshape(ct, np.shape(ct) + (1, 1))
           * np.eye(np.shape(x)[-2], np.shape(x)[-1], k=offset))
if hasattr(np.linalg, "matrix_transpose"):
    defjvp(np.linalg.matrix_transpose, LINEAR)
    defvjp(np.linalg.matrix_transpose, lambda ct, out, /, x: _T(ct))


# -- inverse, solve, determinants ---------------------------------------------------------------

defjvp(np.linalg.inv, lambda dx, out, /, a: -(out @ dx @ out))
defvjp(np.linalg.inv, lambda ct, out, /, a: -(_T(out) @ ct @ _T(out)))


# pinv: P = A^+ at fixed rank (Golub & Pereyra), with Q = I - A P and S = I - P A,
# dP = -P dA P + P P^H dA^H Q + S dA^H P^H P
def _pinv_complements(a: Any, p: Any) -> Any:
    m, n = np.shape(a)[-2:]
    return np.eye(m) - a @ p, np.eye(n) - p @ a


def _pinv_jvp(da: Any, out: Any, /, a: Any, *args: Any, **kwargs: Any) -> Any:
    q, s = _pinv_complements(a, out)
    return -(out @ da @ out) + out @ _H(out) @ _H(da) @ q + s @ _H(da) @ _H(out) @ out


def _pinv_vjp(ct: Any, out: Any, /, a: Any, *args: Any, **kwargs: Any) -> Any:
    q, s = _pinv_complements(a, out)
    c = np.conj(ct)  # the adjoint under Re<X, Y>, conjugated (see the module docstring)
    return np.conj(-(_H(out) @ c @ _H(out)) + q @ _H(c) @ out @ _H(out)
                   + _H(out) @ out @ _H(c) @ s)


defjvp(np.linalg.pinv, _pinv_jvp)
defvjp(np.linalg.pinv, _pinv_vjp)


def _solve_jvp_a(da: Any, out: Any, /, a: Any, b: Any) -> Any:
    if np.ndim(b) == 1:
        return -np.linalg.solve(a, da @ np.expand_dims(out, -1))[..., 0]
    # da's batch in front of the stack of right-hand sides that b may add to a's
    return -np.linalg.solve(a, _lift_to(da, a, np.ndim(out)) @ out)


def _solve_jvp_b(db: Any, out: Any, /, a: Any, b: Any) -> Any:
    if np.ndim(b) == 1:
        dl = lift(db, b, out)
        return np.linalg.solve(a, np.expand_dims(dl, -1))[..., 0]
    return np.linalg.solve(a, _lift_to(db, b, np.ndim(out)))


def _solve_vjp_b(ct: Any, out: Any, /, a: Any, b: Any) -> Any:
    if np.ndim(b) == 1:
        return np.linalg.solve(_T(a), np.expand_dims(ct, -1))[..., 0]
    return np.linalg.solve(_T(a), ct)


def _solve_vjp_a(ct: Any, out: Any, /, a: Any, b: Any) -> Any:
    gb = _solve_vjp_b(ct, out, a, b)
    if np.ndim(b) == 1:
        return -np.expand_dims(gb, -1) * np.expand_dims(out, -2)
    return -(gb @ _T(out))


defjvp(np.linalg.solve, _solve_jvp_a, _solve_jvp_b)
defvjp(np.linalg.solve, _solve_vjp_a, _solve_vjp_b)


def _trace_solve(a: Any, da: Any) -> Any:
    return np.trace(np.linalg.solve(a, da), axis1=-2, axis2=-1)


defjvp(np.linalg.det, lambda da, out, /, a: out * _trace_solve(a, da))
defvjp(np.linalg.det, lambda ct, out, /, a:
       np.reshape(ct * out, np.shape(out) + (1, 1)) * _T(np.linalg.inv(a)))


def _slogdet_jvp(da: Any, out: Any, /, a: Any) -> Any:
    sign, _ = out
    t = _trace_solve(a, da)
    return (sign * (1j * np.imag(t)) if np.iscomplexobj(sign) else None, np.real(t))


def _slogdet_vjp(ct: Any, out: Any, /, a: Any) -> Any:
    c_sign, c_log = cts(ct, out)
    c = c_log * 1.0
    if np.iscomplexobj(out[0]):
        c = c + 1j * np.imag(c_sign * out[0])
    return np.reshape(c, np.shape(c) + (1, 1)) * _T(np.linalg.inv(a))


defjvp(np.linalg.slogdet, _slogdet_jvp)
defvjp(np.linalg.slogdet, _slogdet_vjp)


def _matrix_power_terms(a: Any, n: Any) -> Any:
    """(powers of the base, exponent, base is the inverse)."""
    base = a if n >= 0 else np.linalg.inv(a)
    m = abs(int(n))
    powers = [np.broadcast_to(np.eye(np.shape(a)[-1]), np.shape(a))]
    for _ in range(1, m):
        powers.append(powers[-1] @ base)
    return base, m, powers


def _matrix_power_jvp(da: Any, out: Any, /, a: Any, n: Any) -> Any:
    base, m, powers = _matrix_power_terms(a, n)
    dbase = da if n >= 0 else -(base @ da @ base)
    t = 0.0
    for k in range(m):
        t = t + powers[k] @ dbase @ powers[m - 1 - k]
    return t if m else np.zeros(np.shape(da))


def _matrix_power_vjp(ct: Any, out: Any, /, a: Any, n: Any) -> Any:
    base, m, powers = _matrix_power_terms(a, n)
    g = 0.0
    for k in range(m):
        g = g + _T(powers[k]) @ ct @ _T(powers[m - 1 - k])
    if m == 0:
        return np.zeros(np.shape(a))
    return g if n >= 0 else -(_T(base) @ g @ _T(base))


defjvp(np.linalg.matrix_power, _matrix_power_jvp, ZERO)
defvjp(np.linalg.matrix_power, _matrix_power_vjp, ZERO)


def _multi_dot_parts(xs: Any) -> Any:
    """The factors as matrices (a first vector a row, a last one a column)."""
    mats = list(xs)
    if np.ndim(mats[0]) == 1:
        mats[0] = np.reshape(mats[0], (1, -1))
    if np.ndim(mats[-1]) == 1:
        mats[-1] = np.reshape(mats[-1], (-1, 1))
    return mats


def _chain(mats: Any) -> Any:
    out = mats[0]
    for m in mats[1:]:
        out = out @ m
    return out


def _multi_dot_jvp(dxs: Any, out: Any, /, xs: Any, **kw: Any) -> Any:
    mats = _multi_dot_parts(xs)
    t = None
    for i, d in enumerate(dxs):
        if d is None:
            continue
        batch = bshape(d, xs[i])
        dm = np.reshape(d, batch + np.shape(mats[i]))
        left = _chain(mats[:i]) if i else None
        right = _chain(mats[i + 1:]) if i + 1 < len(mats) else None
        term = dm if left is None else left @ dm
        term = term if right is None else term @ right
        term = np.reshape(term, batch + np.shape(out))
        t = term if t is None else t + term
    return t


def _multi_dot_vjp(ct: Any, out: Any, /, xs: Any, **kw: Any) -> Any:
    mats = _multi_dot_parts(xs)
    c = np.reshape(ct, (np.shape(mats[0])[0], np.shape(mats[-1])[-1]))
    gs = []
    for i in range(len(mats)):
        g = c
        if i + 1 < len(mats):
            g = g @ _T(_chain(mats[i + 1:]))
        if i:
            g = _T(_chain(mats[:i])) @ g
        gs.append(np.reshape(g, np.shape(xs[i])))
    return gs


defjvp(np.linalg.multi_dot, _multi_dot_jvp)
defvjp(np.linalg.multi_dot, _multi_dot_vjp)


# -- Hermitian decompositions: cholesky, eigh, eigvalsh ------------------------------------------

def _tri(a: Any, k: Any, lower: Any) -> Any:
    return np.tril(a, k) if lower else np.triu(a, -k)


def _sym(da: Any, lower: Any) -> Any:
    """The Hermitian matrix NumPy sees when it reads only one triangle of ``a + da``."""
    off = _tri(da, -1, lower)
    d = _diag(da)
    return off + _H(off) + _diag_embed(np.real(d) if np.iscomplexobj(d) else d)


def _sym_adjoint(g: Any, lower: Any) -> Any:
    """Adjoint of :func:`_sym` under Re<A, B>: the cotangent lives on the triangle read."""
    d = _diag(g)
    return _tri(g + _H(g), -1, lower) + _diag_embed(np.real(d) if np.iscomplexobj(d) else d)


def _phi(x: Any) -> Any:
    """The lower triangle with half the (real part of the) diagonal."""
    d = _diag(x)
    return np.tril(x, -1) + 0.5 * _diag_embed(np.real(d) if np.iscomplexobj(d) else d)


def _right_solve(m: Any, l: Any) -> Any:
    """m @ inv(l)."""
    return _H(np.linalg.solve(_H(l), _H(m)))


def _cholesky_jvp(da: Any, out: Any, /, a: Any, *, upper: Any = False) -> Any:
    l = _H(out) if upper else out
    s = _sym(da, not upper)
    x = _right_solve(np.linalg.solve(l, s), _H(l))       # L^-1 S L^-H
    dl = l @ _phi(x)
    return _H(dl) if upper else dl


def _cholesky_vjp(ct: Any, out: Any, /, a: Any, *, upper: Any = False) -> Any:
    l = _H(out) if upper else out
    c = np.conj(_H(ct) if upper else ct)                # Re<C, dL> pairing
    y = _phi(_H(l) @ c)
    g0 = _right_solve(np.linalg.solve(_H(l), y), l)      # L^-H Phi(L^H C) L^-1
    return np.conj(_sym_adjoint(g0, not upper))


defjvp(np.linalg.cholesky, _cholesky_jvp)
defvjp(np.linalg.cholesky, _cholesky_vjp)


def _eig_gaps(w: Any) -> Any:
    """F[..., i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)
    eye = np.eye(np.shape(w)[-1], dtype=bool)
    return np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, diff))


def _eigh_jvp(da: Any, out: Any, /, a: Any, UPLO: Any = "L") -> Any:
    w, v = out
    m = _H(v) @ _sym(da, UPLO.upper() == "L") @ v
    dw = np.real(_diag(m))
    return (dw, v @ (_eig_gaps(w) * m))


def _eigh_vjp(ct: Any, out: Any, /, a: Any, UPLO: Any = "L") -> Any:
    w, v = out
    cw, cv = cts(ct, out)
    inner = _diag_embed(np.real(cw) * 1.0) + _eig_gaps(w) * (_H(v) @ np.conj(cv))
    g = v @ inner @ _H(v)
    return np.conj(_sym_adjoint(g, UPLO.upper() == "L"))


defjvp(np.linalg.eigh, _eigh_jvp)
defvjp(np.linalg.eigh, _eigh_vjp)


def _eigvalsh_jvp(da: Any, out: Any, /, a: Any, UPLO: Any = "L") -> Any:
    _, v = np.linalg.eigh(a, UPLO)
    return np.real(_diag(_H(v) @ _sym(da, UPLO.upper() == "L") @ v))


def _eigvalsh_vjp(ct: Any, out: Any, /, a: Any, UPLO: Any = "L") -> Any:
    _, v = np.linalg.eigh(a, UPLO)
    g = v @ _diag_embed(np.real(ct) * 1.0) @ _H(v)
    return np.conj(_sym_adjoint(g, UPLO.upper() == "L"))


defjvp(np.linalg.eigvalsh, _eigvalsh_jvp)
defvjp(np.linalg.eigvalsh, _eigvalsh_vjp)


# eigvals of a general matrix: dw = diag(V^-1 dA V)
def _eigvals_jvp(da: Any, out: Any, /, a: Any) -> Any:
    w, v = np.linalg.eig(a)
    t = _diag(np.linalg.solve(v, da @ v))
    return t if np.iscomplexobj(out) else np.real(t)


def _eigvals_vjp(ct: Any, out: Any, /, a: Any) -> Any:
    w, v = np.linalg.eig(a)
    return _T(v @ _diag_embed(ct * (1.0 + 0j)) @ np.linalg.inv(v))


defjvp(np.linalg.eigvals, _eigvals_jvp)
defvjp(np.linalg.eigvals, _eigvals_vjp)


# eig of a general matrix, M = V^-1 dA V: dw = diag(M), dV = V (F * M) less the part along
# each column that would change its norm (NumPy's vectors have norm 1; their phase is free)
def _eig_jvp(da: Any, out: Any, /, a: Any) -> Any:
    w, v = out
    m = np.linalg.solve(v, da @ v)
    dv = v @ (_eig_gaps(w) * m)
    dv = dv - v * np.real(np.sum(np.conj(v) * dv, axis=-2, keepdims=True))
    dw = _diag(m)
    return (dw, dv) if np.iscomplexobj(w) else (np.real(dw), np.real(dv))


def _eig_vjp(ct: Any, out: Any, /, a: Any) -> Any:
    w, v = out
    cw, cv = cts(ct, out)
    cv = cv - np.conj(v) * np.real(np.sum(cv * v, axis=-2, keepdims=True))
    inner = _diag_embed(cw * (1.0 + 0j)) + _eig_gaps(w) * (_T(v) @ cv)
    return np.linalg.solve(_T(v), inner @ _T(v))  # V^-T (diag(cw) + F * V^T cv) V^T


defjvp(np.linalg.eig, _eig_jvp)
defvjp(np.linalg.eig, _eig_vjp)


# -- svd ------------------------------------------------------------------------------------

def _svd_check(a: Any, full_matrices: Any, compute_uv: Any, hermitian: Any) -> None:
    m, n = np.shape(a)[-2:]
    if full_matrices and compute_uv and m != n:
        raise NotImplementedError("no derivative rule for np.linalg.svd(full_matrices=True) "
                                  "of a non-square matrix; use full_matrices=False")
    if hermitian:
        raise NotImplementedError("no derivative rule for np.linalg.svd(hermitian=True)")


def _svd_parts(a: Any, out: Any, compute_uv: Any) -> Any:
    if compute_uv:
        u, s, vh = out
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u, s, _H(vh)


def _svd_f(s: Any) -> Any:
    """F[..., i, j] = 1 / (s_j^2 - s_i^2) off the diagonal."""
    return _eig_gaps(s * s)


def _inv_nonzero(s: Any) -> Any:
    zero = s == 0
    return np.where(zero, 0.0, 1.0 / np.where(zero, 1.0, s))


def _svd_jvp(da: Any, out: Any, /, a: Any, full_matrices: Any = True, compute_uv: Any = True,
             hermitian: Any = False) -> Any:
    _svd_check(a, full_matrices, compute_uv, hermitian)
    u, s, v = _svd_parts(a, out, compute_uv)
    p = _H(u) @ da @ v
    ds = np.real(_diag(p))
    if not compute_uv:
        return ds
    f = _svd_f(s)
    row = np.expand_dims(s, -2)                         # [i, j] -> s_j
    ps, sp = p * row, _T(row) * p                       # P S, S P
    s_inv = _inv_nonzero(s)
    inner_u = f * (ps + _H(ps))
    if np.iscomplexobj(p):  # the phase gauge of JAX: the imaginary diagonal goes to U
        inner_u = inner_u + _diag_embed(1j * np.imag(_diag(p)) * s_inv)
    du = u @ inner_u
    dv = v @ (f * (sp + _H(sp)))
    m, n = np.shape(a)[-2:]
    if m > n:
        dav = da @ v
        du = du + (dav - u @ (_H(u) @ dav)) * np.expand_dims(s_inv, -2)
    if n > m:
        dahu = _H(da) @ u
        dv = dv + (dahu - v @ (_H(v) @ dahu)) * np.expand_dims(s_inv, -2)
    return (du, ds, _H(dv))


def _svd_vjp(ct: Any, out: Any, /, a: Any, full_matrices: Any = True, compute_uv: Any = True,
             hermitian: Any = False) -> Any:
    _svd_check(a, full_matrices, compute_uv, hermitian)
    u, s, v = _svd_parts(a, out, compute_uv)
    if not compute_uv:
        return np.conj(u @ _diag_embed(np.real(ct) * 1.0) @ _H(v))
    c_u, c_s, c_vh = cts(ct, out)
    cu, cv = np.conj(c_u), _T(c_vh)                     # Re<C, .> pairings
    f = _svd_f(s)
    row = np.expand_dims(s, -2)
    j1 = f * (_H(u) @ cu)
    j2 = f * (_H(v) @ cv)
    s_inv = _inv_nonzero(s)
    inner = _diag_embed(np.real(c_s) * 1.0) + (j1 + _H(j1)) * row + _T(row) * (j2 + _H(j2))
    if np.iscomplexobj(u) or np.iscomplexobj(cu):
        inner = inner + _diag_embed(1j * np.imag(_diag(_H(u) @ cu)) * s_inv)
    k = u @ inner @ _H(v)
    m, n = np.shape(a)[-2:]
    if m > n:
        k = k + ((cu - u @ (_H(u) @ cu)) * np.expand_dims(s_inv, -2)) @ _H(v)
    if n > m:
        k = k + (u * np.expand_dims(s_inv, -2)) @ _H(cv - v @ (_H(v) @ cv))
    return np.conj(k)


defjvp(np.linalg.svd, _svd_jvp)
defvjp(np.linalg.svd, _svd_vjp)
if hasattr(np.linalg, "svdvals"):  # NumPy 2
    defjvp(np.linalg.svdvals, lambda da, out, /, a: _svd_jvp(da, out, a, False, False))
    defvjp(np.linalg.svdvals, lambda ct, out, /, a: _svd_vjp(ct, out, a, False, False))


# -- lstsq ------------------------------------------------------------------------------------
# lstsq(a, b) = (x, residuals, rank, s): x = pinv(a) b at fixed rank; the residuals
# sum |b - a x|^2 per column (given when a has full column rank and more rows than columns);
# s the singular values of a.  A 1-D b is taken as one column.

def _lstsq_parts(a: Any, b: Any, out: Any) -> Any:
    """(b is 1-D, b and x as columns, the residual b - a x or None, pinv(a))."""
    x, res = out[0], out[1]
    col = np.ndim(b) == 1
    b2, x2 = (np.expand_dims(b, -1), np.expand_dims(x, -1)) if col else (b, x)
    return col, b2, x2, b2 - a @ x2 if np.size(res) else None, np.linalg.pinv(a)


def _lstsq_jvp(pos: int) -> Callable[..., Any]:
    def rule(d: Any, out: Any, /, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        col, b2, x2, r, p = _lstsq_parts(a, b, out)
        if pos == 0:
            dx, change = _pinv_jvp(d, p, a) @ b2, -(d @ x2)
            ds = _svd_jvp(d, out[3], a, False, False)
        else:
            d = np.expand_dims(d, -1) if col else d
            dx, change, ds = p @ d, d, None
        dres = None if r is None else np.sum(2.0 * np.real(np.conj(r) * change), axis=-2)
        return (dx[..., 0] if col else dx, dres, None, ds)
    return rule


def _lstsq_vjp(pos: int) -> Callable[..., Any]:
    def rule(ct: Any, out: Any, /, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        col, b2, x2, r, p = _lstsq_parts(a, b, out)
        cx, cres = cts(ct[:2], out[:2])
        cx = np.expand_dims(cx, -1) if col else cx
        if pos == 1:
            g = _T(p) @ cx
            if r is not None:
                g = g + 2.0 * np.conj(r) * cres
            return g[..., 0] if col else g
        g = _pinv_vjp(cx @ _T(b2), p, a)
        if ct[3] is not None:
            g = g + _svd_vjp(ct[3], out[3], a, False, False)
        if r is not None:
            g = g - 2.0 * (np.conj(r) * cres) @ _T(x2)
        return g
    return rule


defjvp(np.linalg.lstsq, _lstsq_jvp(0), _lstsq_jvp(1), ZERO)
defvjp(np.linalg.lstsq, _lstsq_vjp(0), _lstsq_vjp(1), ZERO)


# -- qr (reduced, m >= n) -------------------------------------------------------------------

def _qr_check(a: Any, mode: Any) -> None:
    m, n = np.shape(a)[-2:]
    if mode not in ("reduced", "r", "complete") or m < n or (mode == "complete" and m != n):
        raise NotImplementedError(f"no derivative rule for np.linalg.qr(mode={mode!r}) of a "
                                  f"{m}x{n} matrix (supported: m >= n, reduced)")


def _qr_parts(a: Any, out: Any, mode: Any) -> Any:
    return (out.Q, out.R) if mode != "r" else np.linalg.qr(a)


def _omega(c: Any) -> Any:
    """Q^H dQ from C = Q^H dA R^-1: antihermitian, with the gauge of a real diagonal of R."""
    low = np.tril(c, -1)
    om = low - _H(low)
    if np.iscomplexobj(c):
        om = om + _diag_embed(1j * np.imag(_diag(c)))
    return om


def _omega_adjoint(n: Any) -> Any:
    low = np.tril(n, -1)
    om = low - np.tril(_H(n), -1)
    if np.iscomplexobj(n):
        om = om + _diag_embed(1j * np.imag(_diag(n)))
    return om


def _qr_jvp(da: Any, out: Any, /, a: Any, mode: Any = "reduced") -> Any:
    _qr_check(a, mode)
    q, r = _qr_parts(a, out, mode)
    dar = _right_solve(da, r)                           # dA R^-1
    c = _H(q) @ dar
    om = _omega(c)
    dr = (c - om) @ r
    if mode == "r":
        return dr
    return (q @ om + dar - q @ c, dr)


def _qr_vjp(ct: Any, out: Any, /, a: Any, mode: Any = "reduced") -> Any:
    _qr_check(a, mode)
    q, r = _qr_parts(a, out, mode)
    if mode == "r":
        c_q, c_r = np.zeros(np.shape(q)), ct
    else:
        c_q, c_r = cts(ct, out)
    cq, cr = np.conj(c_q), np.conj(c_r)
    qcq = _H(q) @ cq
    k = cr @ _H(r) + _omega_adjoint(qcq - cr @ _H(r))
    g = _right_solve(q @ k + cq - q @ qcq, _H(r))        # (...) R^-H
    return np.conj(g)


defjvp(np.linalg.qr, _qr_jvp)
defvjp(np.linalg.qr, _qr_vjp)


# -- norms ----------------------------------------------------------------------------------

def _unit(x: Any) -> Any:
    """conj(x) / |x| (the derivative of |x|), 0 at 0."""
    ax = np.abs(x)
    zero = ax == 0
    return np.where(zero, 0.0, np.conj(x) / np.where(zero, 1.0, ax))


def _tie_weights(v: Any, target: Any, ax: Any) -> Any:
    hit = np.equal(v, target)
    return hit / np.maximum(np.sum(hit, axis=ax, keepdims=True), 1)


def _vector_norm_grad(x: Any, out_k: Any, ord: Any, ax: Any) -> Any:
    """G with d norm = Re(sum(G * dx)) over the axes ``ax``."""
    if ord is None or ord == 2:
        zero = out_k == 0
        return np.where(zero, 0.0, np.conj(x) / np.where(zero, 1.0, out_k))
    absx = np.abs(x)
    if ord == np.inf or ord == -np.inf:
        return _tie_weights(absx, out_k, ax) * _unit(x)
    if ord == 0:
        return np.zeros(np.shape(x))
    if ord == 1:
        return _unit(x)
    p = float(ord)
    zero = absx == 0
    scale = np.where(zero, 0.0, np.where(zero, 1.0, absx) ** (p - 1))
    return scale * _unit(x) * np.where(out_k == 0, 0.0, out_k) ** (1 - p)


def _matrix_norm_grad(x: Any, out_k: Any, ord: Any, r: Any, c: Any) -> Any:
    """G for a matrix norm over the axes (r, c) of x."""
    if ord in (None, "fro"):
        zero = out_k == 0
        return np.where(zero, 0.0, np.conj(x) / np.where(zero, 1.0, out_k))
    xm = np.moveaxis(x, (r, c), (-2, -1))
    if ord in ("nuc", 2, -2):
        u, s, vh = np.linalg.svd(xm, full_matrices=False)
        if ord == "nuc":
            gm = np.conj(u @ vh)
        else:
            k = 0 if ord == 2 else -1
            gm = np.conj(np.expand_dims(u[..., :, k], -1) * np.expand_dims(vh[..., k, :], -2))
    elif ord in (1, -1, np.inf, -np.inf):
        axis = -2 if ord in (1, -1) else -1            # columns sums: over rows
        sums = np.sum(np.abs(xm), axis=axis, keepdims=True)
        pick = np.max(sums, axis=-1 if axis == -2 else -2, keepdims=True) if ord > 0 else \
            np.min(sums, axis=-1 if axis == -2 else -2, keepdims=True)
        w = _tie_weights(sums, pick, -1 if axis == -2 else -2)
        gm = w * _unit(xm)
    else:
        raise NotImplementedError(f"no derivative rule for the matrix norm ord={ord!r}")
    return np.moveaxis(gm, (-2, -1), (r, c))


def _norm_setup(x: Any, ord: Any, axis: Any, keepdims: Any, out: Any) -> Any:
    """(G, negative reduced axes, keepdims) for np.linalg.norm."""
    nd = np.ndim(x)
    kd = bool(keepdims)
    if axis is None and (ord is None or nd == 1):
        ax = tuple(range(-nd, 0))
        out_k = expand(out, ax, kd)
        if ord is None:
            return _vector_norm_grad(x, out_k, None, ax), ax, kd
        return _vector_norm_grad(x, out_k, ord, ax), ax, kd
    if axis is None:
        axis = (0, 1)
    if isinstance(axis, (tuple, list)) and len(axis) == 2:
        r, c = int(axis[0]) % nd, int(axis[1]) % nd
        ax = (r - nd, c - nd)
        return _matrix_norm_grad(x, expand(out, ax, kd), ord, r, c), ax, kd
    ax = neg_axes(axis, nd)
    return _vector_norm_grad(x, expand(out, ax, kd), ord, ax), ax, kd


def _norm_jvp(dx: Any, out: Any, /, x: Any, ord: Any = None, axis: Any = None,
              keepdims: Any = False) -> Any:
    g, ax, kd = _norm_setup(x, ord, axis, keepdims, out)
    return np.sum(np.real(g * dx), axis=ax, keepdims=kd)


def _norm_vjp(ct: Any, out: Any, /, x: Any, ord: Any = None, axis: Any = None,
              keepdims: Any = False) -> Any:
    g, ax, kd = _norm_setup(x, ord, axis, keepdims, out)
    return expand(ct, ax, kd) * g


# ord is a float parameter with a derivative we do not provide: no rule (MissingRuleError)
defjvp(np.linalg.norm, _norm_jvp)
defvjp(np.linalg.norm, _norm_vjp)

if hasattr(np.linalg, "vector_norm"):  # NumPy 2
    def _vnorm(x: Any, axis: Any, keepdims: Any, ord: Any, out: Any) -> Any:
        ax = neg_axes(axis, np.ndim(x))
        return _vector_norm_grad(x, expand(out, ax, keepdims), ord, ax), ax

    defjvp(np.linalg.vector_norm, lambda dx, out, /, x, *, axis=None, keepdims=False, ord=2:
           np.sum(np.real(_vnorm(x, axis, keepdims, ord, out)[0] * dx),
                  axis=_vnorm(x, axis, keepdims, ord, out)[1], keepdims=keepdims))
    defvjp(np.linalg.vector_norm, lambda ct, out, /, x, *, axis=None, keepdims=False, ord=2:
           expand(ct, neg_axes(axis, np.ndim(x)), keepdims) * _vnorm(x, axis, keepdims, ord,
                                                                     out)[0])
    defjvp(np.linalg.matrix_norm, lambda dx, out, /, x, *, keepdims=False, ord="fro":
           _norm_jvp(dx, out, x, ord, (-2, -1), keepdims))
    defvjp(np.linalg.matrix_norm, lambda ct, out, /, x, *, keepdims=False, ord="fro":
           _norm_vjp(ct, out, x, ord, (-2, -1), keepdims))

nondifferentiable(np.linalg.matrix_rank)

# x.dot(y) is np.ndarray.dot(x, y)
same_rules(np.ndarray.dot, np.dot)
