"""Rules for ``scipy.linalg`` (registered only when SciPy is importable).

The rules sit on the public functions (``scipy.linalg.solve_triangular``, not LAPACK's
``dtrtrs``), so the derivative is the function's and a missing one is reported under the name
the user called.  They are written with ``scipy.linalg`` and ``np.linalg`` themselves, which
have rules, so they are differentiable in turn.

Abbreviations as in ``_linalg``: ``a, b`` arguments, ``out`` the primal output, ``dx`` a tangent
with leading batch dimensions ``B``, ``ct`` a cotangent; ``_T`` swaps the last two axes.

Conventions:

- A function that reads one triangle of its argument (``cholesky``, ``cho_factor``, ``eigh``,
  ``solve`` with ``assume_a="sym"``/``"pos"``/``"her"``, ``solve_triangular``) is differentiated
  as it computes: its tangent sees only that triangle, its cotangent lives on it.
- Matrix functions (``expm``, ``logm``, ``sqrtm``) use the Fréchet derivative
  ``L(A, E)``, read off the upper-right block of ``f([[A, E], [0, A]])``; its adjoint is
  ``L(A^T, C)``.
- ``lu_factor`` and ``cho_factor`` return the factors packed in one matrix; their tangent is
  packed the same way (``cho_factor`` leaves the other triangle holding ``a``'s entries, so its
  tangent there is ``da``'s).  The pivots and the ``lower`` flag have no derivative.
- Reverse rules for complex arguments follow ``_linalg`` where they reuse its rules
  (``cholesky``, ``eigh``, ``svdvals``, ``norm``, ``inv``, ``det``); the rules written here
  (triangular, LU, Cholesky and banded solves, ``solve_sylvester``) are for real matrices
  except where they only transpose.
- Not differentiated (``MissingRuleError``): ``eigh`` of a generalized problem (``b``) or of a
  subset; ``solve_triangular`` with ``trans="C"`` of a complex matrix.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np

from .._rules import ZERO, MissingRuleError, defjvp, defvjp
from ._common import cts, lift
from ._linalg import (_cholesky_jvp, _cholesky_vjp, _diag, _diag_embed, _eigh_jvp, _eigh_vjp,
                      _lstsq_jvp, _lstsq_vjp, _norm_jvp, _norm_vjp, _pinv_jvp, _pinv_vjp,
                      _qr_jvp, _qr_vjp, _svd_jvp, _svd_vjp, _sym, _sym_adjoint, _T)

try:
    import scipy.linalg as sla
except ImportError:  # pragma: no cover - overdub_ad works without SciPy
    sla = None


def _nb(d: Any, x: Any) -> int:
    return np.ndim(d) - np.ndim(x)


def _columns(solve: Callable[[Any], Any], rhs: Any, nb: int, nd: int) -> Any:
    """``solve`` (for an ``(n,)`` or ``(n, k)`` right-hand side, no stacking) applied to
    ``rhs`` of shape ``B + s`` (``nb`` batch dimensions, ``s`` of ``nd`` dimensions): the batch
    is moved into extra columns and back."""
    if nb == 0:
        return solve(rhs)
    shape = np.shape(rhs)
    moved = np.moveaxis(np.reshape(rhs, (-1,) + shape[nb:]), 0, -1)  # s + (batch,)
    flat = np.reshape(moved, (shape[nb], -1))
    x = np.reshape(solve(flat), shape[nb:] + (-1,))
    return np.reshape(np.moveaxis(x, -1, 0), shape)


# -- solve, inv, det -------------------------------------------------------------------------

def _effective(m: Any, assume_a: Any, lower: Any, transposed: Any = False) -> Any:
    """The matrix ``solve``/``inv`` compute with: one triangle mirrored for symmetric kinds,
    transposed for ``transposed=True``.  Linear, so it maps tangents as well."""
    kind = (assume_a or "gen").lower()
    if kind in ("sym", "symmetric", "her", "hermitian", "pos", "positive definite"):
        m = _sym(m, lower)
    elif kind in ("upper triangular", "lower triangular"):
        m = np.tril(m) if kind.startswith("lower") else np.triu(m)
    elif kind == "diagonal":
        m = _diag_embed(_diag(m))
    return _T(m) if transposed else m


def _effective_adjoint(g: Any, assume_a: Any, lower: Any, transposed: Any = False) -> Any:
    g = _T(g) if transposed else g
    kind = (assume_a or "gen").lower()
    if kind in ("sym", "symmetric", "her", "hermitian", "pos", "positive definite"):
        return _sym_adjoint(g, lower)
    if kind in ("upper triangular", "lower triangular"):
        return np.tril(g) if kind.startswith("lower") else np.triu(g)
    if kind == "diagonal":
        return _diag_embed(_diag(g))
    return g


def _matvec(m: Any, x: Any, vector: bool | None = None) -> Any:
    """``m @ x`` for ``x`` a vector (``vector``: by default, when ``x`` is 1-d) or a matrix,
    either possibly with batch dimensions."""
    if np.ndim(x) == 1 if vector is None else vector:
        return (m @ np.expand_dims(x, -1))[..., 0]
    return m @ x


def _solve_jvp_a(da: Any, out: Any, a: Any, b: Any, lower: Any = False, *args: Any,
                 assume_a: Any = None, transposed: Any = False, **kw: Any) -> Any:
    A = _effective(a, assume_a, lower, transposed)
    dA = _effective(da, assume_a, lower, transposed)
    return -_solve_batched(A, _matvec(dA, out), _nb(da, a), np.ndim(out))


def _solve_jvp_b(db: Any, out: Any, a: Any, b: Any, lower: Any = False, *args: Any,
                 assume_a: Any = None, transposed: Any = False, **kw: Any) -> Any:
    A = _effective(a, assume_a, lower, transposed)
    return _solve_batched(A, db, _nb(db, b), np.ndim(out))


def _solve_batched(A: Any, rhs: Any, nb: int, nd: int) -> Any:
    return _columns(lambda r: np.linalg.solve(A, r), rhs, nb, nd)


def _solve_vjp_b(ct: Any, out: Any, a: Any, b: Any, lower: Any = False, *args: Any,
                 assume_a: Any = None, transposed: Any = False, **kw: Any) -> Any:
    return np.linalg.solve(_T(_effective(a, assume_a, lower, transposed)), ct)


def _solve_vjp_a(ct: Any, out: Any, a: Any, b: Any, lower: Any = False, *args: Any,
                 assume_a: Any = None, transposed: Any = False, **kw: Any) -> Any:
    gb = _solve_vjp_b(ct, out, a, b, lower, assume_a=assume_a, transposed=transposed)
    g = -(np.outer(gb, out) if np.ndim(out) == 1 else gb @ _T(out))
    return _effective_adjoint(g, assume_a, lower, transposed)


def _inv_jvp(da: Any, out: Any, a: Any, *args: Any, assume_a: Any = None, lower: Any = False,
             **kw: Any) -> Any:
    return -(out @ _effective(da, assume_a, lower) @ out)


def _inv_vjp(ct: Any, out: Any, a: Any, *args: Any, assume_a: Any = None, lower: Any = False,
             **kw: Any) -> Any:
    return _effective_adjoint(-(_T(out) @ ct @ _T(out)), assume_a, lower)


# -- triangular solves -----------------------------------------------------------------------

def _trans(trans: Any) -> int:
    return {"N": 0, "T": 1, "C": 2, 0: 0, 1: 1, 2: 2}[trans]


def _triangle(m: Any, lower: Any, unit_diagonal: Any) -> Any:
    """The part of ``m`` ``solve_triangular`` reads (no diagonal for a unit diagonal)."""
    k = -1 if unit_diagonal else 0
    return np.tril(m, k) if lower else np.triu(m, -k)


def _op(m: Any, trans: int) -> Any:
    if trans == 0:
        return m
    return np.conj(_T(m)) if trans == 2 else _T(m)


def _tri_solve(a: Any, rhs: Any, nb: int, trans: int, lower: Any, unit: Any) -> Any:
    return _columns(lambda r: sla.solve_triangular(a, r, trans=trans, lower=lower,
                                                   unit_diagonal=unit), rhs, nb, np.ndim(rhs))


def _real_trans(a: Any, trans: Any) -> int:
    t = _trans(trans)
    if t == 2 and np.iscomplexobj(a):
        raise MissingRuleError("no derivative rule for scipy.linalg.solve_triangular with "
                               "trans='C' of a complex matrix")
    return 1 if t == 2 else t


def _tri_jvp_a(da: Any, out: Any, a: Any, b: Any, trans: Any = 0, lower: Any = False,
               unit_diagonal: Any = False, *args: Any, **kw: Any) -> Any:
    t = _real_trans(a, trans)
    dT = _op(_triangle(da, lower, unit_diagonal), t)
    return -_tri_solve(a, _matvec(dT, out), _nb(da, a), t, lower, unit_diagonal)


def _tri_jvp_b(db: Any, out: Any, a: Any, b: Any, trans: Any = 0, lower: Any = False,
               unit_diagonal: Any = False, *args: Any, **kw: Any) -> Any:
    t = _real_trans(a, trans)
    return _tri_solve(a, db, _nb(db, b), t, lower, unit_diagonal)


def _tri_vjp_b(ct: Any, out: Any, a: Any, b: Any, trans: Any = 0, lower: Any = False,
               unit_diagonal: Any = False, *args: Any, **kw: Any) -> Any:
    t = _real_trans(a, trans)
    return sla.solve_triangular(a, ct, trans=1 - t, lower=lower, unit_diagonal=unit_diagonal)


def _tri_vjp_a(ct: Any, out: Any, a: Any, b: Any, trans: Any = 0, lower: Any = False,
               unit_diagonal: Any = False, *args: Any, **kw: Any) -> Any:
    t = _real_trans(a, trans)
    gb = _tri_vjp_b(ct, out, a, b, trans, lower, unit_diagonal)
    g = -(np.outer(gb, out) if np.ndim(out) == 1 else gb @ _T(out))  # w.r.t. op(T)
    return _triangle(_T(g) if t else g, lower, unit_diagonal)


# -- Cholesky ---------------------------------------------------------------------------------

def _chol_jvp(da: Any, out: Any, a: Any, lower: Any = False, *args: Any, **kw: Any) -> Any:
    return _cholesky_jvp(da, out, a, upper=not lower)


def _chol_vjp(ct: Any, out: Any, a: Any, lower: Any = False, *args: Any, **kw: Any) -> Any:
    return _cholesky_vjp(ct, out, a, upper=not lower)


def _other(m: Any, lower: Any) -> Any:
    """The strict triangle ``cho_factor`` leaves as it found it."""
    return np.triu(m, 1) if lower else np.tril(m, -1)


def _factor(c: Any, lower: Any) -> Any:
    return np.tril(c) if lower else np.triu(c)


def _cho_factor_jvp(da: Any, out: Any, a: Any, lower: Any = False, *args: Any,
                    **kw: Any) -> Any:
    c, low = out
    factor = _cholesky_jvp(da, _factor(c, low), a, upper=not low)
    return (factor + _other(da, low), None)


def _cho_factor_vjp(ct: Any, out: Any, a: Any, lower: Any = False, *args: Any,
                    **kw: Any) -> Any:
    c, low = out
    g = cts(ct, out)[0]
    return _cholesky_vjp(_factor(g, low), _factor(c, low), a, upper=not low) + _other(g, low)


def _cho_solve_jvp_c(dc: Any, out: Any, c_and_lower: Any, b: Any, *args: Any,
                     **kw: Any) -> Any:
    c, low = c_and_lower
    dc = dc[0]
    F, dF = _factor(c, low), _factor(dc, low)
    # A = L L^T (lower) or U^T U (upper): dA x, then -A^-1 dA x
    v = np.ndim(out) == 1
    if low:
        dAx = _matvec(dF, _matvec(_T(F), out, v), v) + _matvec(F, _matvec(_T(dF), out, v), v)
    else:
        dAx = _matvec(_T(dF), _matvec(F, out, v), v) + _matvec(_T(F), _matvec(dF, out, v), v)
    return -_columns(lambda r: sla.cho_solve((c, low), r), dAx, _nb(dc, c), np.ndim(out))


def _cho_solve_jvp_b(db: Any, out: Any, c_and_lower: Any, b: Any, *args: Any,
                     **kw: Any) -> Any:
    c, low = c_and_lower
    return _columns(lambda r: sla.cho_solve((c, low), r), db, _nb(db, b), np.ndim(out))


def _cho_solve_vjp_b(ct: Any, out: Any, c_and_lower: Any, b: Any, *args: Any,
                     **kw: Any) -> Any:
    c, low = c_and_lower
    return sla.cho_solve((c, low), ct)  # A is symmetric


def _cho_solve_vjp_c(ct: Any, out: Any, c_and_lower: Any, b: Any, *args: Any,
                     **kw: Any) -> Any:
    c, low = c_and_lower
    gb = sla.cho_solve((c, low), ct)
    G = -(np.outer(gb, out) if np.ndim(out) == 1 else gb @ _T(out))  # w.r.t. A
    F = _factor(c, low)
    S = G + _T(G)
    return (_factor(S @ F if low else F @ S, low), None)


# -- LU ---------------------------------------------------------------------------------------

def _permutation(piv: Any) -> Any:
    """The row order ``perm`` with ``A[perm] = L @ U`` from LAPACK's pivots (row swaps)."""
    perm = np.arange(len(piv))
    for i, p in enumerate(np.asarray(piv)):
        perm[i], perm[p] = perm[p], perm[i]
    return perm


def _unpermute(m: Any, perm: Any) -> Any:
    """``P^T m``: the rows of ``m`` put back where ``A`` has them."""
    inverse = np.argsort(perm)
    return m[..., inverse, :] if np.ndim(m) >= 2 else m[inverse]


def _lu_parts(lu: Any) -> tuple[Any, Any]:
    n = np.shape(lu)[-1]
    return np.tril(lu, -1) + np.eye(n), np.triu(lu)


def _lu_factor_jvp(da: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
    lu, piv = out
    L, U = _lu_parts(lu)
    perm = _permutation(piv)
    nb = _nb(da, a)
    pda = da[..., perm, :]
    # F = L^-1 P dA U^-1
    left = _columns(lambda r: sla.solve_triangular(L, r, lower=True, unit_diagonal=True),
                    pda, nb, 2)
    F = _T(_columns(lambda r: sla.solve_triangular(U, r, trans=1), _T(left), nb, 2))
    return (L @ np.tril(F, -1) + np.triu(F) @ U, None)


def _lu_factor_vjp(ct: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
    lu, piv = out
    L, U = _lu_parts(lu)
    C = cts(ct, out)[0]
    G = np.tril(_T(L) @ np.tril(C, -1), -1) + np.triu(np.triu(C) @ _T(U))
    # P^T L^-T G U^-T
    left = sla.solve_triangular(L, G, trans=1, lower=True, unit_diagonal=True)
    right = _T(sla.solve_triangular(U, _T(left), lower=False))
    return _unpermute(right, _permutation(piv))


def _lu_solve_jvp_lu(dlu: Any, out: Any, lu_and_piv: Any, b: Any, trans: Any = 0, *args: Any,
                     **kw: Any) -> Any:
    lu, piv = lu_and_piv
    dlu = dlu[0]
    t = _trans(trans)
    L, U = _lu_parts(lu)
    dL, dU = np.tril(dlu, -1), np.triu(dlu)
    perm = _permutation(piv)
    dLU = dL @ U + L @ dU          # d(P A)
    dA = _unpermute(dLU, perm)
    dAx = _matvec(_op(dA, t), out)
    return -_columns(lambda r: sla.lu_solve((lu, piv), r, trans=t), dAx, _nb(dlu, lu),
                     np.ndim(out))


def _lu_solve_jvp_b(db: Any, out: Any, lu_and_piv: Any, b: Any, trans: Any = 0, *args: Any,
                    **kw: Any) -> Any:
    lu, piv = lu_and_piv
    return _columns(lambda r: sla.lu_solve((lu, piv), r, trans=_trans(trans)), db,
                    _nb(db, b), np.ndim(out))


def _lu_solve_vjp_b(ct: Any, out: Any, lu_and_piv: Any, b: Any, trans: Any = 0, *args: Any,
                    **kw: Any) -> Any:
    lu, piv = lu_and_piv
    t = _trans(trans)
    if np.iscomplexobj(lu) and t == 2:
        return np.conj(sla.lu_solve((lu, piv), np.conj(ct), trans=0))
    return sla.lu_solve((lu, piv), ct, trans=1 - min(t, 1))


def _lu_solve_vjp_lu(ct: Any, out: Any, lu_and_piv: Any, b: Any, trans: Any = 0, *args: Any,
                     **kw: Any) -> Any:
    lu, piv = lu_and_piv
    t = min(_trans(trans), 1)
    gb = _lu_solve_vjp_b(ct, out, lu_and_piv, b, t)
    G = -(np.outer(gb, out) if np.ndim(out) == 1 else gb @ _T(out))  # w.r.t. op(A)
    GA = _T(G) if t else G
    PG = GA[_permutation(piv)]  # P G: its rows in the order of P A = L U
    L, U = _lu_parts(lu)
    return (np.tril(PG @ _T(U), -1) + np.triu(_T(L) @ PG), None)


# -- matrix functions: the Fréchet derivative from a block-triangular matrix --------------------

def _frechet(f: Callable[[Any], Any], a: Any, e: Any) -> Any:
    """``L_f(a, e)``: the upper-right block of ``f([[a, e], [0, a]])`` (stacked ``e`` allowed)."""
    n = np.shape(a)[-1]
    a = np.broadcast_to(a, np.shape(e)[:-2] + (n, n))
    top = np.concatenate([a, e], axis=-1)
    bottom = np.concatenate([np.zeros_like(e), a], axis=-1)
    big = np.concatenate([top, bottom], axis=-2)
    if np.ndim(big) == 2:
        return _primary(f(big))[:n, n:]
    flat = np.reshape(big, (-1, 2 * n, 2 * n))
    blocks = np.stack([_primary(f(m))[:n, n:] for m in flat])
    return np.reshape(blocks, np.shape(e))


def _primary(out: Any) -> Any:
    """The matrix of a function that may return ``(matrix, error estimate)``."""
    return out[0] if isinstance(out, tuple) else out


def _matrix_function(name: str) -> None:
    fn = getattr(sla, name)

    def call(m: Any) -> Any:
        return fn(m)

    def jvp(da: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
        d = _frechet(call, a, lift(da, a, a))
        return (d, None) if isinstance(out, tuple) else d

    def vjp(ct: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
        c = cts(ct, out)[0] if isinstance(out, tuple) else ct
        return _frechet(call, _T(a), c)
    defjvp(fn, jvp, ZERO, ZERO)
    defvjp(fn, vjp, ZERO, ZERO)


# sqrtm and logm: not from the block matrix, whose eigenvalues are a's twice over -- a negative
# one, on the branch cut of the square root and the logarithm, is split by rounding into a
# pair on either side of it, whose roots then cancel (derivatives of 1e13 for 0.3).  For
# S = sqrtm(a), L_sqrt(a, E) is the X of S X + X S = E (well posed: S's eigenvalues lie in
# the right half-plane, or on the imaginary axis); log(a) = 2 log(S), whose block matrix has
# S's eigenvalues, away from the logarithm's cut: L_log(a, E) = 2 L_log(S, L_sqrt(a, E)).
# Adjoints by transposing each factor (as for _frechet).

def _sqrtm_jvp(da: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
    s = _primary(out)
    e = lift(da, a, a)
    d = _sylvester(s, s, e, np.ndim(e) - np.ndim(a))
    return (d, None) if isinstance(out, tuple) else d


def _sqrtm_vjp(ct: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
    s = _T(_primary(out))
    return sla.solve_sylvester(s, s, cts(ct, out)[0] if isinstance(out, tuple) else ct)


def _logm_jvp(da: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
    s = _primary(sla.sqrtm(a))
    e = lift(da, a, a)
    d = 2.0 * _frechet(sla.logm, s, _sylvester(s, s, e, np.ndim(e) - np.ndim(a)))
    return (d, None) if isinstance(out, tuple) else d


def _logm_vjp(ct: Any, out: Any, a: Any, *args: Any, **kw: Any) -> Any:
    s = _T(_primary(sla.sqrtm(a)))
    c = cts(ct, out)[0] if isinstance(out, tuple) else ct
    return sla.solve_sylvester(s, s, 2.0 * _frechet(sla.logm, s, c))


# -- svd, qr, pinv, lstsq: NumPy's rules, on SciPy's spelling of the same results ------------

def _sla_svd_rule(rule: Callable[..., Any]) -> Callable[..., Any]:
    def adapted(d: Any, out: Any, a: Any, full_matrices: Any = True, compute_uv: Any = True,
                *args: Any, **kw: Any) -> Any:
        return rule(d, out, a, full_matrices, compute_uv)
    return adapted


# scipy.linalg.qr's modes as np.linalg.qr's ("full" is "complete", "economic" "reduced"); its
# "r" returns a 1-tuple
_QR_MODES = {"full": "complete", "economic": "reduced", "r": "r"}


def _sla_qr_mode(mode: Any, pivoting: Any) -> str:
    if pivoting or mode not in _QR_MODES:
        raise MissingRuleError(f"no derivative rule for scipy.linalg.qr with mode={mode!r}"
                               f"{' and pivoting' if pivoting else ''} (supported: 'full', "
                               f"'economic', 'r', without pivoting)")
    return _QR_MODES[mode]


_QR = collections.namedtuple("_QR", "Q R")  # np.linalg.qr's result, as its rules read it


def _sla_qr_jvp(da: Any, out: Any, a: Any, overwrite_a: Any = False, lwork: Any = None,
                mode: Any = "full", pivoting: Any = False, *args: Any, **kw: Any) -> Any:
    np_mode = _sla_qr_mode(mode, pivoting)
    if np_mode == "r":  # SciPy's R has all m rows: those past the reduced k are zeros
        dr = _qr_jvp(da, None, a, "r")
        rows = np.shape(out[0])[-2] - np.shape(dr)[-2]
        return (np.concatenate([dr, np.zeros(np.shape(dr)[:-2] + (rows, np.shape(dr)[-1]))],
                               axis=-2) if rows else dr,)
    return tuple(_qr_jvp(da, _QR(*out), a, np_mode))


def _sla_qr_vjp(ct: Any, out: Any, a: Any, overwrite_a: Any = False, lwork: Any = None,
                mode: Any = "full", pivoting: Any = False, *args: Any, **kw: Any) -> Any:
    np_mode = _sla_qr_mode(mode, pivoting)
    if np_mode == "r":
        k = min(np.shape(a)[-2:])
        return _qr_vjp(ct[0][..., :k, :], None, a, "r")
    return _qr_vjp(ct, _QR(*out), a, np_mode)


def _sla_lstsq_jvp(position: int) -> Callable[..., Any]:
    rule = _lstsq_jvp(position)

    def adapted(d: Any, out: Any, a: Any, b: Any, *args: Any, **kw: Any) -> Any:
        dx, dres, rank, ds = rule(d, out, a, b)
        if dres is not None and np.ndim(out[1]) == 0:  # SciPy's residue of a vector b: a number
            dres = dres[..., 0]
        return (dx, dres, rank, ds)
    return adapted


def _sla_pinv_rule(rule: Callable[..., Any], mode: str) -> Callable[..., Any]:
    def adapted(d: Any, out: Any, a: Any, *args: Any, return_rank: Any = False,
                **kw: Any) -> Any:
        if not return_rank:
            return rule(d, out, a)
        if mode == "rev":
            return rule(d[0], out[0], a)
        return (rule(d, out[0], a), None)
    return adapted


# -- eigh, svdvals, norm ----------------------------------------------------------------------

def _eigh_check(b: Any, kw: dict[str, Any]) -> None:
    if b is not None or kw.get("subset_by_index") is not None or \
            kw.get("subset_by_value") is not None:
        raise MissingRuleError("no derivative rule for scipy.linalg.eigh of a generalized "
                               "problem (b=) or of a subset of the eigenvalues")


def _sla_eigh_jvp(da: Any, out: Any, a: Any, b: Any = None, *, lower: Any = True,
                  eigvals_only: Any = False, **kw: Any) -> Any:
    _eigh_check(b, kw)
    uplo = "L" if lower else "U"
    if eigvals_only:
        w, v = sla.eigh(a, lower=lower)
        return _eigh_jvp(da, (w, v), a, uplo)[0]
    return _eigh_jvp(da, out, a, uplo)


def _sla_eigh_vjp(ct: Any, out: Any, a: Any, b: Any = None, *, lower: Any = True,
                  eigvals_only: Any = False, **kw: Any) -> Any:
    _eigh_check(b, kw)
    uplo = "L" if lower else "U"
    if eigvals_only:
        w, v = sla.eigh(a, lower=lower)
        return _eigh_vjp((ct, None), (w, v), a, uplo)
    return _eigh_vjp(ct, out, a, uplo)


# -- Sylvester and banded systems ---------------------------------------------------------------

def _sylvester(a: Any, b: Any, q: Any, nb: int) -> Any:
    """``solve_sylvester`` for ``q`` with ``nb`` batch dimensions."""
    if nb == 0:
        return sla.solve_sylvester(a, b, q)
    shape = np.shape(q)
    flat = np.reshape(q, (-1,) + shape[nb:])
    return np.reshape(np.stack([sla.solve_sylvester(a, b, m) for m in flat]), shape)


def _sylvester_rule(position: int, mode: str) -> Callable[..., Any]:
    def rule(d: Any, out: Any, a: Any, b: Any, q: Any) -> Any:
        x = out
        if mode == "rev":
            y = sla.solve_sylvester(_T(a), _T(b), d)  # A^T Y + Y B^T = C
            return -(y @ _T(x)) if position == 0 else -(_T(x) @ y) if position == 1 else y
        rhs = -(d @ x) if position == 0 else -(x @ d) if position == 1 else d
        return _sylvester(a, b, rhs, _nb(d, (a, b, q)[position]))
    return rule


def _band_indices(l: int, u: int, n: int) -> tuple[Any, Any]:
    offset = np.subtract.outer(np.arange(n), np.arange(n))  # i - j
    rows, cols = np.nonzero((offset <= l) & (-offset <= u))
    return rows, cols


def _dense(ab: Any, l: int, u: int, n: int) -> Any:
    """The matrix stored in band form ``ab`` (``A[i, j] = ab[u + i - j, j]``)."""
    rows, cols = _band_indices(l, u, n)
    dense = np.zeros(np.shape(ab)[:-2] + (n, n), dtype=np.result_type(ab, float))
    dense[..., rows, cols] = ab[..., u + rows - cols, cols]
    return dense


def _band(m: Any, l: int, u: int) -> Any:
    """Adjoint of :func:`_dense`: the band of ``m`` in band storage."""
    n = np.shape(m)[-1]
    rows, cols = _band_indices(l, u, n)
    ab = np.zeros((l + u + 1, n), dtype=np.result_type(m, float))
    ab[u + rows - cols, cols] = m[rows, cols]
    return ab


def _banded_jvp_ab(dab: Any, out: Any, l_and_u: Any, ab: Any, b: Any, *args: Any,
                   **kw: Any) -> Any:
    l, u = l_and_u
    n = np.shape(ab)[-1]
    dAx = _matvec(_dense(dab, l, u, n), out)
    return -_columns(lambda r: sla.solve_banded((l, u), ab, r), dAx, _nb(dab, ab), np.ndim(out))


def _banded_jvp_b(db: Any, out: Any, l_and_u: Any, ab: Any, b: Any, *args: Any,
                  **kw: Any) -> Any:
    l, u = l_and_u
    return _columns(lambda r: sla.solve_banded((l, u), ab, r), db, _nb(db, b), np.ndim(out))


def _banded_vjp_b(ct: Any, out: Any, l_and_u: Any, ab: Any, b: Any, *args: Any,
                  **kw: Any) -> Any:
    l, u = l_and_u
    return np.linalg.solve(_T(_dense(ab, l, u, np.shape(ab)[-1])), ct)


def _banded_vjp_ab(ct: Any, out: Any, l_and_u: Any, ab: Any, b: Any, *args: Any,
                   **kw: Any) -> Any:
    l, u = l_and_u
    gb = _banded_vjp_b(ct, out, l_and_u, ab, b)
    G = -(np.outer(gb, out) if np.ndim(out) == 1 else gb @ _T(out))
    return _band(G, l, u)


# -- registration ------------------------------------------------------------------------------

if sla is not None:
    defjvp(sla.solve, _solve_jvp_a, _solve_jvp_b, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO)
    defvjp(sla.solve, _solve_vjp_a, _solve_vjp_b, ZERO, ZERO, ZERO, ZERO, ZERO, ZERO)
    defjvp(sla.inv, _inv_jvp, ZERO, ZERO)
    defvjp(sla.inv, _inv_vjp, ZERO, ZERO)
    defjvp(sla.det, lambda da, out, a, *args: out * np.trace(
        np.linalg.solve(a, da), axis1=-2, axis2=-1), ZERO, ZERO)
    defvjp(sla.det, lambda ct, out, a, *args: np.reshape(ct * out, np.shape(out) + (1, 1))
           * _T(np.linalg.inv(a)), ZERO, ZERO)
    defjvp(sla.solve_triangular, _tri_jvp_a, _tri_jvp_b, *[ZERO] * 5)
    defvjp(sla.solve_triangular, _tri_vjp_a, _tri_vjp_b, *[ZERO] * 5)
    defjvp(sla.cholesky, _chol_jvp, ZERO, ZERO, ZERO)
    defvjp(sla.cholesky, _chol_vjp, ZERO, ZERO, ZERO)
    defjvp(sla.cho_factor, _cho_factor_jvp, ZERO, ZERO, ZERO)
    defvjp(sla.cho_factor, _cho_factor_vjp, ZERO, ZERO, ZERO)
    defjvp(sla.cho_solve, _cho_solve_jvp_c, _cho_solve_jvp_b, ZERO, ZERO)
    defvjp(sla.cho_solve, _cho_solve_vjp_c, _cho_solve_vjp_b, ZERO, ZERO)
    defjvp(sla.lu_factor, _lu_factor_jvp, ZERO, ZERO)
    defvjp(sla.lu_factor, _lu_factor_vjp, ZERO, ZERO)
    defjvp(sla.lu_solve, _lu_solve_jvp_lu, _lu_solve_jvp_b, ZERO, ZERO, ZERO)
    defvjp(sla.lu_solve, _lu_solve_vjp_lu, _lu_solve_vjp_b, ZERO, ZERO, ZERO)
    _matrix_function("expm")
    defjvp(sla.sqrtm, _sqrtm_jvp, ZERO, ZERO)
    defvjp(sla.sqrtm, _sqrtm_vjp, ZERO, ZERO)
    defjvp(sla.logm, _logm_jvp, ZERO, ZERO)
    defvjp(sla.logm, _logm_vjp, ZERO, ZERO)
    defjvp(sla.eigh, _sla_eigh_jvp, None)
    defvjp(sla.eigh, _sla_eigh_vjp, None)
    defjvp(sla.svd, _sla_svd_rule(_svd_jvp), ZERO, ZERO, ZERO, ZERO, ZERO)
    defvjp(sla.svd, _sla_svd_rule(_svd_vjp), ZERO, ZERO, ZERO, ZERO, ZERO)
    defjvp(sla.qr, _sla_qr_jvp, ZERO, ZERO, ZERO, ZERO, ZERO)
    defvjp(sla.qr, _sla_qr_vjp, ZERO, ZERO, ZERO, ZERO, ZERO)
    defjvp(sla.pinv, _sla_pinv_rule(_pinv_jvp, "fwd"))
    defvjp(sla.pinv, _sla_pinv_rule(_pinv_vjp, "rev"))
    defjvp(sla.lstsq, _sla_lstsq_jvp(0), _sla_lstsq_jvp(1), ZERO, ZERO, ZERO, ZERO, ZERO)
    defvjp(sla.lstsq, _lstsq_vjp(0), _lstsq_vjp(1), ZERO, ZERO, ZERO, ZERO, ZERO)
    defjvp(sla.svdvals, lambda da, out, a, *args: _svd_jvp(da, out, a, False, False),
           ZERO, ZERO)
    defvjp(sla.svdvals, lambda ct, out, a, *args: _svd_vjp(ct, out, a, False, False),
           ZERO, ZERO)
    defjvp(sla.norm, lambda dx, out, x, ord=None, axis=None, keepdims=False, *args, **kw:
           _norm_jvp(dx, out, x, ord, axis, keepdims), None, ZERO, ZERO, ZERO)
    defvjp(sla.norm, lambda ct, out, x, ord=None, axis=None, keepdims=False, *args, **kw:
           _norm_vjp(ct, out, x, ord, axis, keepdims), None, ZERO, ZERO, ZERO)
    defjvp(sla.solve_sylvester, *(_sylvester_rule(i, "fwd") for i in range(3)))
    defvjp(sla.solve_sylvester, *(_sylvester_rule(i, "rev") for i in range(3)))
    defjvp(sla.solve_banded, ZERO, _banded_jvp_ab, _banded_jvp_b, ZERO, ZERO, ZERO)
    defvjp(sla.solve_banded, ZERO, _banded_vjp_ab, _banded_vjp_b, ZERO, ZERO, ZERO)
