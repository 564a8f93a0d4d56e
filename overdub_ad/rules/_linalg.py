"""Rules for ``np.linalg``: solve, inv, pinv, det, slogdet, matrix_power, multi_dot,
cholesky, eigh, eig, svd, lstsq, qr, norm...; and the matrix helpers (``_T``, ``_H``,
``_diag``, ``_lift_to``...) that the rules of products (``_products``) and of ``scipy.linalg``
(``_scipy_linalg``) share.

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
  system; ``qr`` is supported in reduced mode (and complete where ``m <= n``), ``svd`` for
  ``full_matrices=False`` or square matrices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import LINEAR, ZERO, defjvp, defvjp, nondifferentiable
from ._common import bshape, cts, expand, eye, lift, nbatch, neg_axes


def _T(a: Any) -> Any:
    return np.swapaxes(a, -1, -2)


def _H(a: Any) -> Any:
    return np.conj(np.swapaxes(a, -1, -2))


def _diag_embed(v: Any) -> Any:
    """The stacked diagonal matrices with diagonals ``v`` (..., n) -> (..., n, n)."""
    n = np.shape(v)[-1]
    return np.expand_dims(v, -1) * eye(n)


def _diag(a: Any) -> Any:
    return np.diagonal(a, 0, -2, -1)


def _lift_to(dx: Any, x: Any, nd: Any) -> Any:
    """``dx`` (tangent of ``x``) with 1s inserted after its batch dims to have ``nd`` dims
    besides the batch."""
    nb = nbatch(dx, x)
    s = np.shape(dx)
    return np.reshape(dx, s[:nb] + (1,) * (nd - np.ndim(x)) + s[nb:])


# -- trace over the last two axes (NumPy 2's np.linalg.trace) ----------------------------------

if hasattr(np.linalg, "trace"):
    defjvp(np.linalg.trace, lambda dx, out, /, x, *, offset=0, dtype=None:
           np.trace(dx, offset, -2, -1))
    defvjp(np.linalg.trace, lambda ct, out, /, x, *, offset=0, dtype=None:
           np.reshape(ct, np.shape(ct) + (1, 1))
           * eye(np.shape(x)[-2], np.shape(x)[-1], k=offset))
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
    return eye(m) - a @ p, eye(n) - p @ a


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


def _adjugate(a: Any) -> Any:
    """adj(a), for any square matrices (singular ones too, where det(a) inv(a) does not exist):
    by the SVD a = U S V^H, adj(a) = det(U) det(V^H) V adj(S) U^H, adj(S) = diag(the product
    of the other singular values)."""
    u, s, vh = np.linalg.svd(a)
    n = np.shape(s)[-1]
    others = np.stack([np.prod(s[..., [j for j in range(n) if j != i]], axis=-1)
                       for i in range(n)], axis=-1)
    scale = np.linalg.det(u) * np.linalg.det(vh)
    adj = (np.conj(_T(vh)) * np.expand_dims(others, -2)) @ np.conj(_T(u))
    return np.reshape(scale, np.shape(scale) + (1, 1)) * adj


def _det_jvp(da: Any, out: Any, /, a: Any) -> Any:
    try:
        return out * _trace_solve(a, da)
    except np.linalg.LinAlgError:  # a singular matrix: d det = tr(adj(a) da)
        return np.trace(_adjugate(a) @ da, axis1=-2, axis2=-1)


def _det_vjp(ct: Any, out: Any, /, a: Any) -> Any:
    try:
        return np.reshape(ct * out, np.shape(out) + (1, 1)) * _T(np.linalg.inv(a))
    except np.linalg.LinAlgError:  # a singular matrix: the cofactors, adj(a)^T
        return np.reshape(ct, np.shape(ct) + (1, 1)) * _T(_adjugate(a))


defjvp(np.linalg.det, _det_jvp)
defvjp(np.linalg.det, _det_vjp)


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
    powers = [np.broadcast_to(eye(np.shape(a)[-1]), np.shape(a))]
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


def _gaps_times(w: Any, x: Any) -> Any:
    """F * x, F[..., i, j] = 1 / (w_j - w_i) off the diagonal and 0 on it.  Where two values
    are equal F is infinite: the vectors have no derivative there, and the product is
    infinite or nan, as in JAX (without NumPy's warnings).  A reverse rule whose vectors'
    cotangent is None -- the vectors unused, only the values -- leaves this term out: the
    values' derivative exists at a repeated value."""
    diff = np.expand_dims(w, -2) - np.expand_dims(w, -1)
    on = eye(np.shape(w)[-1], dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(on, 0.0, 1.0 / np.where(on, 1.0, diff)) * x


def _eigh_jvp(da: Any, out: Any, /, a: Any, UPLO: Any = "L") -> Any:
    w, v = out
    m = _H(v) @ _sym(da, UPLO.upper() == "L") @ v
    dw = np.real(_diag(m))
    with np.errstate(invalid="ignore"):  # (vectors of a repeated value: no derivative)
        return (dw, v @ _gaps_times(w, m))


def _eigh_vjp(ct: Any, out: Any, /, a: Any, UPLO: Any = "L") -> Any:
    w, v = out
    cw, cv = cts(ct, out)
    inner = _diag_embed(np.real(cw) * 1.0)
    if ct[1] is not None:  # (the vectors used)
        inner = inner + _gaps_times(w, _H(v) @ np.conj(cv))
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
    with np.errstate(invalid="ignore"):  # (vectors of a repeated value: no derivative)
        dv = v @ _gaps_times(w, m)
        dv = dv - v * np.real(np.sum(np.conj(v) * dv, axis=-2, keepdims=True))
    dw = _diag(m)
    return (dw, dv) if np.iscomplexobj(w) else (np.real(dw), np.real(dv))


def _eig_vjp(ct: Any, out: Any, /, a: Any) -> Any:
    w, v = out
    cw, cv = cts(ct, out)
    inner = _diag_embed(cw * (1.0 + 0j))
    if ct[1] is not None:  # (the vectors used)
        cv = cv - np.conj(v) * np.real(np.sum(cv * v, axis=-2, keepdims=True))
        inner = inner + _gaps_times(w, _T(v) @ cv)
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
    row = np.expand_dims(s, -2)                         # [i, j] -> s_j
    ps, sp = p * row, _T(row) * p                       # P S, S P
    s_inv = _inv_nonzero(s)
    inner_u = _gaps_times(s * s, ps + _H(ps))         # F[i, j] = 1 / (s_j^2 - s_i^2)
    if np.iscomplexobj(p):  # the phase gauge of JAX: the imaginary diagonal goes to U
        inner_u = inner_u + _diag_embed(1j * np.imag(_diag(p)) * s_inv)
    with np.errstate(invalid="ignore"):  # (vectors of a repeated value: no derivative)
        du = u @ inner_u
        dv = v @ _gaps_times(s * s, sp + _H(sp))
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
    row = np.expand_dims(s, -2)
    # (a factor whose cotangent is None is unused: its term left out, see _gaps_times)
    j1 = _gaps_times(s * s, _H(u) @ cu) if ct[0] is not None else 0.0 * (_H(u) @ cu)
    j2 = _gaps_times(s * s, _H(v) @ cv) if ct[2] is not None else 0.0 * (_H(v) @ cv)
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


# -- qr (reduced, any shape; complete where it is the reduced one) ---------------------------
# A wide matrix (m < n) is [X | Y], X square: Q R_X = X is X's QR, and R_Y = Q^H Y.

def _qr_check(a: Any, mode: Any) -> None:
    m, n = np.shape(a)[-2:]
    if mode not in ("reduced", "r", "complete") or (mode == "complete" and m > n):
        raise NotImplementedError(f"no derivative rule for np.linalg.qr(mode={mode!r}) of a "
                                  f"{m}x{n} matrix (supported: reduced, and complete where "
                                  f"m <= n)")


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


def _qr_tall_jvp(da: Any, q: Any, r: Any) -> tuple[Any, Any]:
    """(dQ, dR) of the QR of a tall or square matrix (m >= n, R square)."""
    dar = _right_solve(da, r)                           # dA R^-1
    c = _H(q) @ dar
    om = _omega(c)
    return q @ om + dar - q @ c, (c - om) @ r


def _qr_tall_vjp(cq: Any, cr: Any, q: Any, r: Any) -> Any:
    """The cotangent of a tall or square matrix from those of its Q and R (JAX's transpose
    convention: conjugated in, conjugated out)."""
    cq, cr = np.conj(cq), np.conj(cr)
    qcq = _H(q) @ cq
    k = cr @ _H(r) + _omega_adjoint(qcq - cr @ _H(r))
    return np.conj(_right_solve(q @ k + cq - q @ qcq, _H(r)))  # (...) R^-H


def _qr_jvp(da: Any, out: Any, /, a: Any, mode: Any = "reduced") -> Any:
    _qr_check(a, mode)
    q, r = _qr_parts(a, out, mode)
    m, n = np.shape(a)[-2:]
    if m >= n:
        dq, dr = _qr_tall_jvp(da, q, r)
    else:
        y = a[..., m:]
        dq, dr_x = _qr_tall_jvp(da[..., :m], q, r[..., :m])
        dr = np.concatenate([dr_x, _H(dq) @ y + _H(q) @ da[..., m:]], axis=-1)
    return dr if mode == "r" else (dq, dr)


def _qr_vjp(ct: Any, out: Any, /, a: Any, mode: Any = "reduced") -> Any:
    _qr_check(a, mode)
    q, r = _qr_parts(a, out, mode)
    if mode == "r":
        c_q, c_r = np.zeros(np.shape(q)), ct
    else:
        c_q, c_r = cts(ct, out)
    m, n = np.shape(a)[-2:]
    if m >= n:
        return _qr_tall_vjp(c_q, c_r, q, r)
    y, c_ry = a[..., m:], c_r[..., m:]
    # R_Y = Q^H Y: its cotangent reaches Q (conj(Y) C_Y^H) and Y (conj(Q) C_Y)
    g_x = _qr_tall_vjp(c_q + np.conj(y) @ _H(c_ry), c_r[..., :m], q, r[..., :m])
    return np.concatenate([g_x, np.conj(q) @ c_ry], axis=-1)


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
