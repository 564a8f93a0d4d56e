"""Every registered derivative rule, checked numerically with ``overdub_ad._check.check_rule``.

The table ``CASES`` holds ``(fn, args, kwargs)`` triples; a meta-test fails when a callable in
``overdub_ad.testing.shipped_rules()`` has no case (a nondifferentiable one just gets called).  The
elementwise and broadcasting families are also swept with hypothesis over random shapes
(broadcasting pairs included) and values inside each function's domain.
"""

from __future__ import annotations

import builtins
import cmath
import math
import operator
import statistics

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import overdub_ad.rules  # noqa: F401  (registers the tables)
from overdub_ad import defjvp, defvjp, jvp
from overdub_ad._check import RuleCheckError, check_rule
from overdub_ad.rules._evaluation import _GUARDED
from overdub_ad.rules._scalar import NUMBER_EXEMPTIONS
from overdub_ad.rules._shape import _pad_copying
from overdub_ad.rules._random import DRAWN
from overdub_ad.rules._ufunc_methods import _add_reduceat, _NATIVE
from overdub_ad.testing import isolated_rules, shipped_rules
from tests.conftest import fd

try:
    import scipy.special as sc
except ImportError:  # pragma: no cover
    sc = None

# NumPy 2 deprecates np.cross of 2-vectors; the rule still supports them
pytestmark = pytest.mark.filterwarnings(
    "ignore:Arrays of 2-dimensional vectors:DeprecationWarning")

rng = np.random.default_rng(20240501)


def R(*shape):
    return rng.standard_normal(shape)


def Cx(*shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def U(lo, hi, *shape):
    return rng.uniform(lo, hi, shape)


def spd(n, *batch, complex_=False):
    x = (Cx if complex_ else R)(*batch, n, n)
    return x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)


def case(fn, *args, _check=None, **kwargs):
    return (fn, args, kwargs, _check or {})


_ARG0 = {"wrt": (0,)}  # a float parameter (norm's ord) is not differentiated
M = R(3, 4)
A3 = R(3, 3) + 3 * np.eye(3)
X = U(0.2, 0.9, 2, 3)
Z = X + 1j * U(0.2, 0.9, 2, 3)
V5 = R(5)
T234 = R(2, 3, 4)
ZEROS = T234.copy()
ZEROS[0, 1, 2] = ZEROS[1, 0, 0] = ZEROS[1, 0, 3] = 0.0
TIE = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0]])  # two-way ties: FD agrees with "split evenly"
NANS = np.where(M > 1.0, np.nan, M)

CASES = [
    # -- math -------------------------------------------------------------------------------------
    *[case(f, x) for f, x in [
        (math.sin, 0.7), (math.cos, 0.7), (math.tan, 0.7), (math.asin, 0.3), (math.acos, -0.4),
        (math.atan, 1.7), (math.sinh, 0.7), (math.cosh, -0.7), (math.tanh, 0.4),
        (math.asinh, -1.3), (math.acosh, 1.8), (math.atanh, 0.6), (math.exp, 0.9),
        (math.expm1, 1e-3), (math.log1p, 0.4), (math.log2, 3.3), (math.log10, 3.3),
        (math.sqrt, 2.2), (math.erf, 0.3), (math.erfc, 0.9), (math.gamma, 2.3),
        (math.gamma, -1.7), (math.gamma, 0.3), (math.lgamma, 4.6), (math.lgamma, -1.3),
        (math.lgamma, 25.0), (math.fabs, -1.5), (math.degrees, 1.0), (math.radians, 80.0),
        (math.frexp, 5.5), (math.modf, -5.25)]],
    *[case(f, 1.3) for f in (getattr(math, "exp2", None), getattr(math, "cbrt", None)) if f],
    case(math.cbrt, -2.7) if hasattr(math, "cbrt") else case(math.sqrt, 1.0),
    case(math.log, 2.5), case(math.log, 2.5, 3.0),
    case(math.atan2, 0.3, -0.8), case(math.pow, 1.3, 2.2), case(math.pow, 0.5, -2.0),
    case(math.hypot, 1.0, 2.0, 3.0), case(math.hypot, -4.0),
    case(float.conjugate, 1.3), case(complex.conjugate, 1.3 + 0.4j),
    case(float.__float__, 1.3),
    *([case(getattr(complex, "__complex__"), 1.3 + 0.4j)] if hasattr(complex, "__complex__")
      else []),
    case(math.copysign, 1.5, -2.0), case(math.fmod, 7.3, 2.1), case(math.fmod, -7.3, 2.1),
    case(math.remainder, 7.3, 2.1), case(math.ldexp, 1.5, 3), case(math.nextafter, 1.5, 2.0),
    case(math.fsum, [1.0, 2.0, 3.0]), case(math.prod, [1.5, 0.0, 3.0, 2.0]),
    case(math.prod, [1.5, 2.0], start=2.0), case(math.dist, [1.0, 2.0], [0.5, -1.0]),
    # -- statistics (which sum as fractions: rules, not their code) -------------------------------
    *[case(f, [1.0, 2.5, 4.0, 0.5]) for f in (statistics.mean, statistics.variance,
                                               statistics.pvariance, statistics.stdev,
                                               statistics.pstdev, statistics.harmonic_mean)],
    case(statistics.mean, np.array([1.0, 2.5])),
    *[case(f, [1.0, 2.5, 4.0, 0.5]) for f in [getattr(statistics, "_mean_stdev", None)] if f],
    case(statistics.harmonic_mean, [1.0, 2.5, 4.0], [1.0, 2.0, 0.5]),
    case(statistics._normal_dist_inv_cdf, 0.3, 1.2, 0.7),  # NormalDist.inv_cdf's helper
    # -- eval/exec run natively, guarded: nothing to check but that they run ---------------------
    *[case(guard, "k = 2.0" if guard.__name__ == "exec" else "2.0", {}, None, (),
           _check={"wrt": ()}) for guard in _GUARDED.values()],
    # -- ufunc methods the stand-ins leave to NumPy, guarded: likewise ---------------------------
    case(_NATIVE["outer"], np.add, (R(2), R(3)), {}, _check={"wrt": ()}),
    case(_NATIVE["reduce"], np.add, (R(3),), {"where": np.array([True, False, True])},
         _check={"wrt": ()}),
    case(_NATIVE["accumulate"], np.subtract, (R(3),), {}, _check={"wrt": ()}),
    case(_NATIVE["reduceat"], np.maximum, (R(4), [0, 2]), {}, _check={"wrt": ()}),
    # -- np.add.reduceat: NumPy's own, with rules (a sum over slices) ----------------------------
    case(_add_reduceat, R(7), [0, 2, 5], 0, _check={"wrt": (0,)}),
    case(_add_reduceat, R(4, 6), [3, 1, 4, 4], 1, _check={"wrt": (0,)}),
    # -- cmath ------------------------------------------------------------------------------------
    *[case(f, 0.6 + 0.8j) for f in (cmath.sin, cmath.cos, cmath.tan, cmath.asin, cmath.acos,
                                     cmath.atan, cmath.sinh, cmath.cosh, cmath.tanh, cmath.asinh,
                                     cmath.acosh, cmath.atanh, cmath.exp, cmath.log,
                                     cmath.log10, cmath.sqrt, cmath.phase, cmath.polar)],
    case(cmath.sqrt, -2.0), case(cmath.log, 1 + 2j, 2 + 0.5j), case(cmath.phase, -1.5),
    case(cmath.rect, 2.0, 0.5),
    # -- operator & builtins ----------------------------------------------------------------------
    *[case(f, 1.3, -0.6) for f in (operator.add, operator.sub, operator.mul, operator.truediv,
                                    operator.iadd, operator.isub, operator.imul,
                                    operator.itruediv)],
    *[case(f, R(3), R(2, 3)) for f in (operator.add, operator.sub, operator.mul,
                                       operator.truediv)],
    case(operator.mul, 2.0, Cx(2, 3)), case(operator.iadd, R(2, 3), R(3)),
    case(operator.isub, R(2, 3), 2.0), case(operator.imul, R(2, 3), R(3)),
    case(operator.itruediv, R(2, 3), U(1, 2, 3)), case(operator.truediv, 2.0, U(1, 2, 2, 3)),
    case(operator.mod, 7.3, -2.1), case(operator.mod, U(-3, 3, 4), U(0.5, 1, 4)),
    case(operator.imod, 5.3, 2.0),
    case(operator.pow, 1.3, 2.5), case(operator.pow, -2.0, 0.5), case(operator.pow, 0.0, 2.0),
    case(operator.pow, U(0.5, 2, 3), 2.5), case(operator.pow, U(0.5, 2, 3), U(0, 2, 2, 3)),
    case(operator.pow, 2.0 + 1j, 1.5 - 0.5j), case(operator.ipow, U(0.5, 2, 3), 3.0),
    case(builtins.pow, 1.7, -0.4),
    case(operator.neg, R(3)), case(operator.neg, 1.5), case(operator.pos, R(2, 2)),
    case(operator.abs, -1.5), case(operator.abs, 3 + 4j),
    case(operator.abs, np.array([1 + 1j, 3j])),
    case(builtins.abs, R(3)), case(builtins.abs, 0.0),
    case(builtins.float, 1.5), case(builtins.float, np.array(2.5)), case(builtins.complex, 1.5),
    case(builtins.complex, 1.0, 2.0),
    case(float.__new__, float, 1.5, _check={"wrt": (1,)}),
    case(complex.__new__, complex, 1.5 - 0.5j, _check={"wrt": (1,)}),
    case(complex.__new__, complex, 1.0, 2.0, _check={"wrt": (1, 2)}),
    case(builtins.max, 1.0, 2.0), case(builtins.max, 2.0, 2.0), case(builtins.max, 1.0, 3.0, 2.0),
    case(builtins.max, [1.0, 3.0, 2.0]), case(builtins.max, R(4)),
    case(builtins.max, [1.0, -3.0], key=abs), case(builtins.min, 2.0, 1.0),
    case(builtins.min, 1.0, 1.0), case(builtins.min, (4.0, 1.0, 2.0)),
    case(builtins.sum, [1.0, 2.0, 3.0]), case(builtins.sum, [R(2), R(2)], 1.5),
    case(builtins.sum, R(3, 2)), case(builtins.divmod, 7.5, 2.0),
    # -- ufuncs not in the hypothesis sweep -------------------------------------------------------
    case(np.divmod, U(-3, 3, 2, 3), U(0.5, 1, 3)), case(np.frexp, R(4)), case(np.modf, R(4)),
    case(np.ldexp, R(3), np.array([1, -2, 3])), case(np.copysign, R(3), R(2, 3)),
    case(np.heaviside, np.array([-1.0, 0.0, 2.0]), R(3), _check={"wrt": (1,)}),
    case(np.nextafter, R(3), R(3)), case(np.fmod, U(-3, 3, 4), U(0.5, 1, 4)),
    case(np.remainder, U(-3, 3, 4), -U(0.5, 1, 4)), case(np.mod, 5.3, U(0.5, 1, 4)),
    case(np.maximum, TIE, TIE[::-1]), case(np.minimum, TIE, 2.0), case(np.fmax, TIE, np.nan),
    case(np.fmin, np.array([1.0, np.nan, 3.0]), np.array([2.0, 1.0, np.nan])),
    case(np.sinc, np.array([0.0, 0.3, -1.7])), case(np.nan_to_num, np.array([1.0, np.nan, 2.0])),
    case(np.real, Z), case(np.real, X), case(np.imag, Z), case(np.imag, X), case(np.conj, Z),
    case(np.angle, Z), case(np.angle, Z, deg=True), case(np.angle, X),
    case(np.absolute, np.array([1 + 1j, 0j, -2.0])), case(np.absolute, np.array([0.0, -1.0])),
    case(np.clip, X, 0.4, 0.7), case(np.clip, X, X[0] * 0.5, None),
    case(np.clip, X, a_min=0.4, a_max=0.7), case(np.clip, TIE, 2.0, 3.0),
    case(np.clip, X, min=0.3), case(np.where, X > 0.5, X, R(3)),
    case(np.where, R(3) > 0, 2.0, Z),
    # -- reductions -------------------------------------------------------------------------------
    case(np.sum, T234), case(np.sum, T234, 1), case(np.sum, T234, axis=(0, 2), keepdims=True),
    case(np.sum, Z, -1), case(np.sum, M, where=M > 0, axis=1), case(np.sum, 2.5),
    case(np.mean, T234, (0, 2)), case(np.mean, M, where=M > 0), case(np.mean, Z),
    case(np.nansum, NANS, 0), case(np.nanmean, NANS),
    case(np.prod, T234, 1), case(np.prod, ZEROS, axis=(1, 2)), case(np.prod, ZEROS),
    case(np.prod, Z, 0), case(np.prod, ZEROS, 2, keepdims=True, initial=2.0),
    case(np.prod, M, where=M > 0), case(np.nanprod, NANS, 1),
    case(np.max, TIE, 1), case(np.max, TIE[:, :2]), case(np.min, TIE, 0, keepdims=True),
    case(np.amax, T234, (0, 1)), case(np.amin, T234), case(np.max, M, initial=5.0, axis=0),
    case(np.nanmax, np.array([1.0, np.nan, 3.0, 3.0])), case(np.nanmin, NANS, 1),
    case(np.ptp, TIE, 1), case(np.ptp, T234),
    case(np.var, T234, 1), case(np.std, T234, axis=(0, 2), ddof=1), case(np.var, Z),
    case(np.std, M, keepdims=True, correction=1, axis=0), case(np.var, M, where=M > -0.5),
    case(np.nanstd, NANS, 1), case(np.nanvar, NANS),
    case(np.nanmedian, NANS), case(np.nanmedian, NANS, 1),
    case(np.nanmedian, NANS, 0, keepdims=True),
    case(np.average, M, 1, U(1, 2, 4)), case(np.average, M, weights=U(1, 2, 3, 4)),
    case(np.average, M, None, U(1, 2, 3, 4), True), case(np.average, M, 0),
    case(np.average, M, 0, U(1, 2, 3), True, keepdims=True),
    case(np.cumsum, T234, 1), case(np.cumsum, M), case(np.cumprod, T234, 2),
    case(np.cumprod, ZEROS, 2), case(np.cumprod, ZEROS), case(np.cumprod, Z, 0),
    case(np.trace, T234), case(np.trace, T234, 1, 2, 0), case(np.trace, M, -1),
    # -- shape ------------------------------------------------------------------------------------
    case(np.reshape, T234, (4, 6)), case(np.reshape, T234, (4, 6), order="F"),
    case(np.ravel, T234),
    case(np.ravel, M, "F"), case(np.transpose, T234), case(np.transpose, T234, (1, 0, 2)),
    case(np.moveaxis, T234, 0, -1), case(np.moveaxis, T234, (0, 1), (2, 0)),
    case(np.swapaxes, T234, 0, 2), case(np.squeeze, R(2, 1, 3)), case(np.squeeze, R(1, 3), 0),
    case(np.expand_dims, M, 1), case(np.expand_dims, M, (0, -1)),
    case(np.atleast_1d, 1.5), case(np.atleast_2d, V5), case(np.atleast_3d, V5, M),
    case(np.broadcast_to, V5, (3, 5)), case(np.broadcast_arrays, V5, R(3, 1), 2.0),
    case(np.concatenate, [M, M[:1]]), case(np.concatenate, [M, V5], axis=None),
    case(np.concatenate, [M, M], 1), case(np.stack, [V5, V5, V5], axis=1),
    case(np.stack, [M, M], -1), case(np.hstack, [V5, V5]), case(np.hstack, [M, M[:, :2]]),
    case(np.vstack, [V5, V5]), case(np.dstack, [M, M]), case(np.column_stack, [V5, V5]),
    case(np.append, M, M, axis=0), case(np.append, M, V5), case(np.append, V5, [1.5, 2.5]),
    case(np.split, T234, 2), case(np.array_split, T234, [1, 3], 2), case(np.hsplit, M, 2),
    case(np.vsplit, M, [1]), case(np.dsplit, T234, 2),
    case(np.repeat, M, 2), case(np.repeat, M, [1, 0, 2], 0), case(np.tile, V5, (2, 2)),
    case(np.tile, M, 2), case(np.diag, V5), case(np.diag, V5, -2), case(np.diag, M, 1),
    case(np.diagflat, M), case(_pad_copying, M, 2),
    case(_pad_copying, M, ((1, 2), (0, 3)), mode="reflect"),
    case(_pad_copying, M, 2, mode="wrap"), case(_pad_copying, M, 3, mode="edge"),
    case(_pad_copying, M, 1, mode="symmetric"), case(_pad_copying, M, 1, constant_values=2.0),
    case(np.roll, T234, 2), case(np.roll, T234, (1, -1), (0, 2)), case(np.roll, T234, 1, 1),
    case(np.flip, T234), case(np.flip, T234, 1), case(np.flipud, M), case(np.fliplr, M),
    case(np.rot90, T234, 3, (2, 1)), case(np.rot90, M),
    case(np.triu, T234, 1), case(np.tril, M), case(np.diagonal, T234, 1, 2, 0),
    case(np.diagonal, M), case(np.diff, T234), case(np.diff, T234, 2, 0),
    case(np.diff, M, prepend=0.5, append=M[:, :2]),
    case(np.array, [1.0, 2.0, 3.0]), case(np.array, [[1.0, 2.0], [3.0, 4.0]]),
    case(np.array, [V5, V5]), case(np.array, M, ndmin=4), case(np.asarray, M),
    case(np.asarray, [1.0, 2 + 1j]), case(np.asanyarray, [[2.0], [3.0]]),
    case(np.array, [1.5, 2.5], dtype=int), case(np.full, (2, 3), 1.5),
    case(np.full, (2, 3), V5[:3]), case(np.full_like, M, V5[:4]), case(np.full_like, M, 2.0),
    case(np.linspace, 1.0, 2.5, 5), case(np.linspace, V5[:3], 2.5, 5, axis=1, retstep=True),
    case(np.linspace, M[0], V5[:4], 4, False), case(np.copy, M),
    case(np.vander, V5), case(np.vander, V5[:3], 4, True), case(np.vander, [0.0, 1.5, -2.0], 3),
    case(np.vander, V5[:2] + 1j * V5[2:4], 3),
    case(np.ascontiguousarray, M.T), case(np.asfortranarray, M),
    # -- indexing ---------------------------------------------------------------------------------
    case(operator.getitem, T234, 1), case(operator.getitem, T234, (slice(None), 0)),
    case(operator.getitem, T234, (Ellipsis, 1)), case(operator.getitem, T234, (None, 1, 2)),
    case(operator.getitem, T234, np.array([1, 1, 0])),
    case(operator.getitem, T234, ([0, 1, 1], slice(None), [2, 2, 3])),
    case(operator.getitem, T234, T234 > 0), case(operator.getitem, M, (slice(None), [0, 0, 3])),
    case(operator.getitem, V5, 2), case(operator.getitem, [1.5, 2.5, 3.5], 1),
    case(operator.getitem, [1.5, 2.5, 3.5], slice(0, 2)),
    case(np.take, M, [0, 2, 2]), case(np.take, T234, [[0, 1], [1, 1]], axis=1),
    case(np.take, V5, [7, -9], mode="clip"), case(np.take, V5, [7, -9], mode="wrap"),
    case(np.take_along_axis, M, np.argsort(M, axis=1), 1),
    case(np.take_along_axis, M, np.array([[0], [0], [2]]), axis=0),
    case(np.compress, [True, False, True], M, axis=0), case(np.compress, [1, 0, 1], M),
    case(np.extract, M > 0, M),
    case(np.sort, M), case(np.sort, M, 0), case(np.sort, M, axis=None), case(np.sort, Z),
    case(np.choose, np.array([[0, 1, 2], [2, 1, 0]]), [R(2, 3), R(3), 1.5]),
    case(np.choose, np.array([0, 3, 1]), [R(3), R(3)], mode="clip"),
    case(np.select, [M > 0, M < -1], [R(3, 4), R(4)], 0.5), case(np.select, [V5 > 0], [Cx(5)]),
    case(np.partition, V5, 2), case(np.partition, M, [0, 2], axis=0),
    case(np.partition, M, 1, axis=None),
    case(np.median, M), case(np.median, M, 1), case(np.median, T234, (0, 2), keepdims=True),
    *[case(f, V5) for f in (np.float64, np.longdouble, np.complex128, np.clongdouble)],
    *[case(f, V5, _check={"eps": 1e-2, "rtol": 1e-4}) for f in (np.float32, np.complex64)],
    case(np.float64, 1.5), case(np.complex128, Cx(3)),
    case(np.ndarray.__array_wrap__, M, R(3, 4)), case(np.ndarray.__array_wrap__, V5, R(5)),
    case(np.bincount, np.array([0, 1, 1, 4]), R(4)), case(np.bincount, np.array([2, 0]), R(2), 5),
    case(np.interp, U(-0.5, 3.5, 7), [0.0, 1.0, 2.5, 3.0], R(4)),
    case(np.interp, U(0.1, 2.9, 3), [0.0, 1.0, 2.5, 3.0], R(4), left=0.0, right=1.0),
    case(np.interp, U(-1.0, 4.0, 9), np.array([0.0, 1.0, 2.5, 3.0]), [1.0, -2.0, 0.5, 3.0], -1.0,
         2.0),
    # -- linalg -----------------------------------------------------------------------------------
    case(np.matmul, R(3, 4), R(4, 2)), case(np.matmul, R(4), R(2, 4, 3)),
    case(np.matmul, R(2, 3, 4), R(4)), case(np.matmul, R(4), R(4)),
    case(np.matmul, R(2, 1, 3, 4), R(5, 4, 2)), case(operator.matmul, Cx(3, 4), R(4, 2)),
    case(operator.imatmul, R(3, 3), R(3, 3)),
    case(np.einsum, "ij,jk->ik", R(3, 4), R(4, 2)), case(np.einsum, "ii->i", R(3, 3)),
    case(np.einsum, "ii", R(3, 3)), case(np.einsum, "i,j", R(3), R(2)),
    case(np.einsum, "...ij,...jk", R(2, 3, 4), R(4, 2)), case(np.einsum, "ij,j->", R(3, 4), R(4)),
    case(np.einsum, "ijk,kj->ik", R(2, 3, 3), R(3, 3), optimize=True),
    case(np.einsum, "i...,i->...", R(3, 1, 2), R(3)),
    case(np.einsum, "ij,ij,j->i", R(3, 4), R(3, 4), Cx(4)),
    case(np.einsum, R(3, 4), [0, 1], R(4), [1], [0]),
    case(np.einsum, "ij,kj->ik", R(1, 4), R(3, 4)),
    case(np.einsum, "iij->j", R(3, 3, 2)),
    case(np.dot, R(3, 4), R(4, 2)), case(np.dot, R(2, 3, 4), R(5, 4, 2)), case(np.dot, R(3), R(3)),
    case(np.dot, 2.0, R(3)), case(np.dot, R(2, 3), R(3)), case(np.inner, R(2, 3), R(4, 3)),
    case(np.inner, R(3), 1.5), case(np.tensordot, R(2, 3, 4), R(3, 4, 5)),
    case(np.tensordot, R(2, 3, 4), R(4, 2), axes=([0, 2], [1, 0])),
    case(np.tensordot, R(3, 2), R(4), axes=0),
    case(np.kron, R(2, 3), R(4, 2)), case(np.kron, R(3), R(2, 2)), case(np.outer, R(3), R(2, 2)),
    case(np.vdot, Cx(3, 2), Cx(6)),
    case(np.convolve, R(5), R(3)), case(np.convolve, R(2), Cx(4), "same"),
    case(np.convolve, R(5), R(3), mode="valid"),
    case(np.linalg.lstsq, R(5, 3), R(5)), case(np.linalg.lstsq, Cx(4, 2), Cx(4, 3)),
    case(np.linalg.lstsq, R(3, 4), R(3)),
    case(np.cross, R(4, 3), R(3)), case(np.cross, R(2), R(3, 2)),
    case(np.linalg.inv, A3),
    case(np.linalg.inv, R(2, 3, 3) + 3 * np.eye(3)), case(np.linalg.inv, Cx(3, 3) + 3 * np.eye(3)),
    case(np.linalg.solve, A3, R(3)), case(np.linalg.solve, A3, R(3, 2)),
    case(np.linalg.solve, R(2, 3, 3) + 3 * np.eye(3), R(3)),
    case(np.linalg.solve, R(2, 3, 3) + 3 * np.eye(3), R(2, 3, 2)),
    case(np.linalg.solve, Cx(3, 3) + 3 * np.eye(3), Cx(3)),
    case(np.linalg.det, A3), case(np.linalg.det, R(2, 3, 3)), case(np.linalg.det, Cx(3, 3)),
    case(np.linalg.slogdet, R(2, 3, 3)), case(np.linalg.slogdet, Cx(3, 3)),
    case(np.linalg.matrix_power, R(3, 3), 3), case(np.linalg.matrix_power, A3, -2),
    case(np.linalg.matrix_power, A3, 0),
    case(np.linalg.multi_dot, [R(3), R(3, 4), R(4, 2), R(2)]),
    case(np.linalg.multi_dot, [R(2, 3), R(3, 4), R(4, 4)]),
    case(np.linalg.cholesky, spd(3)), case(np.linalg.cholesky, spd(3, 2)),
    case(np.linalg.cholesky, spd(3, complex_=True)),
    case(np.linalg.eigh, spd(4)), case(np.linalg.eigh, spd(3, 2), UPLO="U"),
    case(np.linalg.eigh, spd(3, complex_=True), _check={"outputs": (0,)}),
    case(np.linalg.eigvalsh, spd(4, complex_=True)), case(np.linalg.eigvalsh, R(3, 3), UPLO="U"),
    case(np.linalg.eigvals, R(3, 3)), case(np.linalg.eigvals, Cx(3, 3)),
    case(np.linalg.eig, np.diag([1.0, 2.0, 3.5]) + 0.2 * R(3, 3)),
    case(np.linalg.eig, Cx(2, 3, 3), _check={"outputs": (0,)}),
    case(np.linalg.pinv, M), case(np.linalg.pinv, Cx(2, 3, 2)),
    case(np.linalg.svd, R(4, 3), full_matrices=False), case(np.linalg.svd, R(3, 5), False),
    case(np.linalg.svd, R(2, 3, 3)), case(np.linalg.svd, R(4, 3), compute_uv=False),
    case(np.linalg.svd, Cx(4, 3), compute_uv=False),
    case(np.linalg.svd, Cx(4, 3), full_matrices=False, _check={"outputs": (1,)}),
    case(np.linalg.svd, Cx(2, 4), full_matrices=False, _check={"outputs": (1,)}),
    case(np.linalg.qr, R(4, 3)), case(np.linalg.qr, R(2, 3, 3)), case(np.linalg.qr, R(4, 3), "r"),
    case(np.linalg.qr, Cx(4, 3)), case(np.linalg.qr, R(3, 3), mode="complete"),
    case(np.linalg.norm, M), case(np.linalg.norm, Cx(5)),
    *[case(np.linalg.norm, V5, o, _check=_ARG0) for o in (np.inf, 1, 3, -np.inf, 0.5, 0)],
    *[case(np.linalg.norm, M, o, _check=_ARG0) for o in ("nuc", 2, -2, 1, -np.inf, "fro")],
    case(np.linalg.norm, Cx(4), 3, _check=_ARG0),
    case(np.linalg.norm, T234, axis=(2, 0), ord=np.inf, keepdims=True),
    case(np.linalg.norm, T234, axis=1), case(np.linalg.norm, Cx(2, 3, 4), axis=(0, 1)),
    case(np.linalg.norm, T234, keepdims=True),
    # -- fft --------------------------------------------------------------------------------------
    *[c for norm in (None, "ortho", "forward") for c in (
        case(np.fft.fft, Cx(2, 6), norm=norm), case(np.fft.fft, R(6, 3), 4, 0, norm),
        case(np.fft.fft, Cx(5), n=8, norm=norm), case(np.fft.ifft, Cx(2, 6), norm=norm),
        case(np.fft.ifft, Cx(5, 2), 7, 0, norm=norm), case(np.fft.rfft, R(2, 6), norm=norm),
        case(np.fft.rfft, R(7, 2), n=5, axis=0, norm=norm), case(np.fft.rfft, R(7), 10, norm=norm),
        case(np.fft.irfft, Cx(2, 4), norm=norm), case(np.fft.irfft, Cx(4, 2), 7, 0, norm=norm),
        case(np.fft.irfft, Cx(4), n=9, norm=norm), case(np.fft.hfft, Cx(4), norm=norm),
        case(np.fft.hfft, Cx(5, 2), n=7, axis=0, norm=norm), case(np.fft.ihfft, R(6), norm=norm),
        case(np.fft.ihfft, R(2, 7), n=5, norm=norm), case(np.fft.fft2, Cx(3, 4), norm=norm),
        case(np.fft.ifft2, Cx(2, 3, 4), s=(4, 2), norm=norm),
        case(np.fft.fftn, Cx(2, 3, 4), norm=norm),
        case(np.fft.fftn, R(2, 3, 4), axes=(0, 2), s=(3, 5), norm=norm),
        case(np.fft.ifftn, Cx(2, 3, 4), axes=(1,), norm=norm),
        case(np.fft.rfft2, R(3, 4), norm=norm),
        case(np.fft.rfftn, R(2, 3, 4), norm=norm),
        case(np.fft.rfftn, R(2, 3, 5), s=(4, 6), axes=(1, 2), norm=norm),
        case(np.fft.irfft2, Cx(3, 4), norm=norm), case(np.fft.irfftn, Cx(2, 3, 4), norm=norm),
        case(np.fft.irfftn, Cx(2, 3, 4), s=(2, 5), axes=(0, 1), norm=norm))],
    case(np.fft.fftshift, R(3, 4)), case(np.fft.fftshift, R(3, 5), axes=1),
    case(np.fft.ifftshift, Cx(5, 4), axes=(0,)),
]

CASES += [  # ndarray methods: x.sum(1) is np.ndarray.sum(x, 1)
    case(np.ndarray.sum, T234, 1), case(np.ndarray.mean, T234, keepdims=True),
    case(np.ndarray.prod, ZEROS, (0, 2)), case(np.ndarray.max, TIE, 1), case(np.ndarray.min, M),
    case(np.ndarray.std, M, 0, ddof=1), case(np.ndarray.var, Z), case(np.ndarray.cumsum, M, 1),
    case(np.ndarray.cumprod, ZEROS), case(np.ndarray.trace, M, 1),
    case(np.ndarray.reshape, T234, 4, 6), case(np.ndarray.reshape, T234, (6, -1), order="F"),
    case(np.ndarray.transpose, T234), case(np.ndarray.transpose, T234, 2, 0, 1),
    case(np.ndarray.__copy__, M), case(np.ndarray.__deepcopy__, M, {}),
    case(np.generic.__copy__, np.float64(0.7)),
    case(np.generic.__deepcopy__, np.complex128(0.7 - 0.2j), {}, _check={"wrt": (0,)}),
    case(np.ndarray.transpose, T234, (1, 0, 2)), case(np.ndarray.ravel, M),
    case(np.ndarray.flatten, M, "F"), case(np.ndarray.squeeze, R(1, 3)),
    case(np.ndarray.swapaxes, T234, 0, 1), case(np.ndarray.repeat, M, 2, 1),
    case(np.ndarray.copy, M), case(np.ndarray.diagonal, T234, 0, 1, 2),
    case(np.ndarray.astype, M, np.complex128),
    case(np.ndarray.take, M, [0, 5]), case(np.ndarray.item, M, 5), case(np.ndarray.item, M, 1, 2),
    case(np.ndarray.item, np.array([[2.5]])), case(np.ndarray.conj, Z),
    case(np.ndarray.conjugate, Z), case(np.ndarray.clip, X, 0.4, 0.7),
    case(np.ndarray.clip, X, max=0.5),
    case(np.ndarray.dot, R(3, 4), R(4)),
]

if hasattr(np.linalg, "vector_norm"):  # NumPy 2 (the project allows NumPy >= 1.23)
    CASES += [
        case(np.linalg.matmul, R(3), R(3, 2)), case(np.linalg.tensordot, R(2, 3), R(3, 2), axes=1),
        case(np.linalg.outer, R(3), Cx(2)), case(np.vecdot, Cx(2, 3), Cx(3)),
        case(np.linalg.vecdot, R(2, 3), R(2, 3), axis=0), case(np.linalg.cross, R(3), R(3)),
        case(np.linalg.trace, T234, offset=1), case(np.linalg.matrix_transpose, T234),
        case(np.matrix_transpose, T234), case(np.linalg.diagonal, T234),
        case(np.linalg.cholesky, spd(3), upper=True), case(np.linalg.svdvals, R(3, 4)),
        case(np.linalg.vector_norm, T234, axis=(0, 2), ord=3),
        case(np.linalg.vector_norm, Cx(2, 3)),
        case(np.linalg.matrix_norm, T234, ord="nuc", keepdims=True),
        case(np.linalg.matrix_norm, T234, ord=-1),
    ]
if hasattr(np, "cumulative_sum"):
    CASES += [case(np.cumulative_sum, M, axis=1, include_initial=True),
              case(np.cumulative_sum, V5), case(np.cumulative_prod, ZEROS[0], axis=1,
                                                   include_initial=True),
              case(np.cumulative_prod, V5), case(np.unstack, M, axis=1)]
if hasattr(np, "matvec"):
    CASES += [case(np.matvec, R(2, 3, 4), R(4)), case(np.matvec, R(3, 4), R(2, 4)),
              case(np.vecmat, Cx(3), Cx(2, 3, 4)), case(np.vecmat, R(2, 3), R(3, 4))]
if hasattr(np, "astype"):
    CASES += [case(np.astype, M, np.complex128), case(np.astype, M, np.int64)]
if hasattr(math, "sumprod"):  # Python 3.12+
    CASES += [case(math.sumprod, [1.5, -2.0, 0.5], [0.3, 1.1, -4.0])]
if hasattr(math, "fma"):  # Python 3.13+
    CASES += [case(math.fma, 1.3, -0.7, 2.1)]

def _scipy_cases():
    """scipy.linalg, the scipy.special functions scipy.stats calls, and the primitives of the
    SciPy solvers' stand-ins (built as the stand-ins build them)."""
    import scipy.integrate as si
    import scipy.linalg as sla
    import scipy.optimize as so
    import scipy.signal as ss
    import scipy.special._ufuncs as scu

    import scipy.stats as stats

    from overdub_ad.rules import _scipy_solvers as sol
    from overdub_ad.rules import _scipy_stats as stats_rules
    from overdub_ad.rules import _special_params as sp

    a4 = R(4, 4) + 4 * np.eye(4)
    s4 = a4 @ a4.T
    band = np.array([[0.0, 1.0, 2.0, 3.0], [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 0.0]])
    vals = {"outputs": (0,)}  # eigenvectors: LAPACK may flip their signs between the steps
    k, c = 0.7, 2.0

    def root_problem():
        call, theta, _ = sol._bind(so.brentq, "f", "args",
                                   (lambda t, c: t ** 3 - c * k, 0.0, 3.0), {"args": (c,)})
        return sol._Implicit(call, sol._root_residual(False), sol._solution_of("x", False)), theta

    def quad_problem():
        call, theta, _ = sol._bind(si.quad, "func", "args",
                                   (lambda s, c: np.exp(-k * s) * c, 0.0, 1.0), {"args": (c,)})
        return sol._Quadrature(call), theta

    def flow_problem():
        call, theta, _ = sol._bind(si.odeint, "func", "args",
                                   (lambda y, t, c: -k * y + c, np.array([1.0, 0.5]),
                                    np.linspace(0.0, 1.0, 4)),
                                   {"args": (c,), "rtol": 1e-11, "atol": 1e-11})
        return sol._Flow(call, ivp=False), theta

    root, root_theta = root_problem()
    integrand, quad_theta = quad_problem()
    flow, flow_theta = flow_problem()
    return [
        case(sla.solve, a4, R(4)), case(sla.solve, a4, R(4, 2), transposed=True),
        case(sla.solve, s4, R(4), assume_a="pos"), case(sla.inv, a4), case(sla.det, a4),
        case(sla.solve_triangular, a4, R(4)),
        case(sla.solve_triangular, a4, R(4, 2), lower=True, trans=1),
        case(sla.solve_triangular, a4, R(4), unit_diagonal=True, trans="T"),
        case(sla.cholesky, s4), case(sla.cholesky, s4, lower=True), case(sla.cho_factor, s4),
        case(sla.cho_factor, s4, True), case(sla.cho_solve, sla.cho_factor(s4), R(4)),
        case(sla.cho_solve, sla.cho_factor(s4, lower=True), R(4, 2)),
        case(sla.lu_factor, a4), case(sla.lu_solve, sla.lu_factor(a4), R(4)),
        case(sla.lu_solve, sla.lu_factor(a4), R(4, 2), trans=1),
        case(sla.expm, 0.5 * R(3, 3)), case(sla.logm, s4), case(sla.sqrtm, s4),
        case(sla.svdvals, R(3, 4)), case(sla.norm, R(3, 4)), case(sla.norm, R(5), 3),
        case(sla.solve_sylvester, a4, R(3, 3) + 3 * np.eye(3), R(4, 3)),
        case(sla.solve_banded, (1, 1), band, R(4)), case(sla.solve_banded, (1, 1), band, R(4, 2)),
        case(sla.eigh, s4, _check=vals), case(sla.eigh, s4, lower=False, _check=vals),
        case(sla.eigh, s4, eigvals_only=True),
        case(sla.svd, R(4, 3), full_matrices=False, _check={"outputs": (1,)}),
        case(sla.svd, R(3, 3), _check={"outputs": (1,)}),
        case(sla.svd, R(4, 3), compute_uv=False), case(sla.qr, R(4, 3), mode="economic"),
        case(sla.qr, R(3, 4)), case(sla.qr, R(4, 3), mode="r"), case(sla.pinv, R(4, 3)),
        case(sla.pinv, R(3, 4), return_rank=True), case(sla.lstsq, R(5, 3), R(5)),
        case(sla.lstsq, R(5, 3), R(5, 2)),
        # convolutions of any dimension, every mode, either argument the larger
        *[case(f, R(3, 4), R(2, 3), mode) for f in (ss.convolve, ss.correlate, ss.convolve2d,
                                                    ss.correlate2d)
          for mode in ("full", "same", "valid")],
        *[case(f, R(2, 2), R(3, 4), mode) for f in (ss.convolve, ss.correlate2d)
          for mode in ("full", "same")],
        case(ss.convolve, R(2, 3, 2), R(2, 2, 2), "valid"), case(ss.correlate, Cx(3, 3), Cx(2, 2)),
        case(ss.lfilter, np.array([0.5, 0.3, -0.2]), np.array([1.2, -0.4, 0.1]), R(7)),
        case(ss.lfilter, np.array([0.5, 0.3]), np.array([1.0, -0.4, 0.1]), R(3, 6), axis=0),
        case(sc.betaincc, 2.0, 3.0, _P), case(sc.chdtr, 3.0, X + 0.5),
        case(sc.chdtrc, 3.0, X + 0.5), case(sc.stdtr, 4.0, X - 0.5),
        case(sc.fdtr, 3.0, 4.0, X + 0.5), case(sc.fdtrc, 3.0, 4.0, X + 0.5),
        # the shape and order partials themselves, in their last argument
        case(sp.gammainc_da, 2.5, X, _check={"wrt": (1,)}),
        case(sp.betainc_da, 2.0, 3.0, _P, _check={"wrt": (2,)}),
        case(sp.betainc_db, 2.0, 3.0, _P, _check={"wrt": (2,)}),
        case(sp.jv_dv, 1.5, X + 0.5, _check={"wrt": (1,)}),
        case(sp.yv_dv, 0.5, X + 0.5, _check={"wrt": (1,)}),
        case(sp.ive_dv, 2.5, X + 0.5, _check={"wrt": (1,)}),
        case(sp.kve_dv, 1.3, X + 0.5, _check={"wrt": (1,)}),
        case(sc.pdtr, 3, X + 1.0),
        case(sc.pdtrc, 3, X + 1.0), case(sc.yn, 2, X + 0.5), case(sc.poch, X + 0.5, 0.6),
        case(sc.zeta, 3.0, X + 0.5, _check={"wrt": (1,)}),
        case(scu._beta_pdf, _P, 1.5, 2.5),
        *[case(f, 3.0, 7.0, _P, _check={"wrt": (2,)})
          for f in (scu._binom_pmf, scu._binom_cdf, scu._binom_sf)],
        case(sol.checked, 1.5, 2.0, "f", _check={"wrt": (0,)}),
        case(sol.refused, R(3), (1.5,), "f", _check={"wrt": (0,)}),
        case(sol.implicit_solution, root, root_theta, _check={"atol": 1e-7, "rtol": 1e-5}),
        case(sol.integral, integrand, quad_theta, 0.2, 0.9, _check={"atol": 1e-7,
                                                                   "rtol": 1e-5}),
        case(sol.trajectory, flow, flow_theta, np.array([1.0, 0.5]),
             _check={"atol": 1e-6, "rtol": 1e-5}),
        # quantiles: the inverse of cdf (sf), in q and a shape parameter
        *[case(stats_rules._quantile, stats.weibull_min, method, U(0.1, 0.9, 3),
               U(1.2, 2.5, 3), _check={"rtol": 1e-5})
          for method in ("ppf", "isf")],
        case(stats_rules._quantile, stats.norm, "ppf", U(0.1, 0.9, 2, 3)),
    ]


if sc is not None:
    _P = U(0.1, 0.9, 2, 3)
    _Zc = U(0.3, 1.5, 3) + 1j * U(-1, 1, 3)
    CASES += [
        *[case(f, X + 0.3) for f in (sc.gamma, sc.rgamma, sc.gammaln, sc.digamma, sc.psi, sc.erf,
                                    sc.erfc, sc.erfi, sc.erfcx, sc.dawsn, sc.expm1, sc.log1p,
                                    sc.cosm1, sc.expi, sc.exp1, sc.lambertw, sc.j0, sc.j1,
                                    sc.y0, sc.y1, sc.i0, sc.k0, sc.k1, sc.k0e, sc.k1e)],
        *[case(f, X - 0.5) for f in (sc.ndtr, sc.log_ndtr, sc.expit, sc.log_expit, sc.exprel,
                                    sc.i1, sc.i0e, sc.i1e)],
        *[case(f, _P) for f in (sc.erfinv, sc.erfcinv, sc.ndtri, sc.logit, sc.entr, sc.ellipk,
                               sc.ellipe)],
        *[case(f, _Zc) for f in (sc.gamma, sc.loggamma, sc.erf, sc.lambertw)],
        case(sc.polygamma, 2, X), case(sc.multigammaln, X[0] + 2, 3), case(sc.beta, X, X[0]),
        case(sc.betaln, X, 1.5), case(sc.gammainc, 2.5, X), case(sc.gammaincc, 1.5, X),
        case(sc.betainc, 2.0, 3.0, _P), case(sc.xlogy, X, _P), case(sc.xlog1py, X, _P),
        case(sc.rel_entr, _P, X), case(sc.kl_div, _P, X), case(sc.expn, 2, X + 0.1),
        case(sc.jv, 1.5, X), case(sc.yv, 0.5, X), case(sc.iv, 2.5, X), case(sc.kv, 1.3, X),
        case(sc.ive, 1.5, X), case(sc.kve, 0.7, X),
        case(sc.cbrt, X - 0.5), case(sc.spence, X + 0.3),
        case(sc.huber, X, 2.0 * X - 1.0), case(sc.huber, 0.5 + X, X - 0.5),  # (both pieces)
        case(sc.pseudo_huber, X + 0.2, 3.0 * X - 1.5), case(sc.binom, X + 3.0, 2.0 * X),
        case(sc.softmax, X), case(sc.softmax, X, 1), case(sc.log_softmax, X, 0),
        case(sc.logsumexp, X), case(sc.logsumexp, X, 1, _P),
        case(sc.logsumexp, X, axis=0, keepdims=True),
        case(sc.logsumexp, X, None, _P - 0.5, False, True),
        *[case(f, 100 * X - 50) for f in (sc.sindg, sc.cosdg, sc.tandg)], case(sc.cotdg, 60 * X),
        case(np.i0, X - 0.5), case(np.i0, np.array([0.0, 1.5, -2.0])),  # (its rule needs SciPy)
    ]
    CASES += _scipy_cases()
    from overdub_ad.rules import _special as _spr
    # (built from X, _P and _Zc: no new draws from rng, which the cases below share)
    _W = {"wrt": (1,)}
    CASES += [  # functions of several outputs, elliptic, hypergeometric, inverses, polynomials
        *[case(f, X - 0.5) for f in (sc.sici, sc.shichi, sc.fresnel, sc.airy)],
        *[case(f, _Zc) for f in (sc.sici, sc.shichi, sc.fresnel, sc.airy, sc.wrightomega)],
        case(sc.sici, np.array([1e-3, -0.05, 0.09, 2.0])),  # (near 0: the series of sin x / x)
        case(sc.shichi, np.array([1e-3, -0.05, 0.09, 2.0])),
        case(sc.airye, 3.0 * X),  # (below 0 SciPy's eAi is NaN: Bi compared only)
        case(sc.airye, -3.0 * X, _check={"outputs": (2, 3), "modes": ("fwd",)}),
        case(sc.ellipj, 6.0 * X - 3.0, _P), case(sc.ellipj, 10.0 * X, 0.999 * _P),
        case(sc.ellipkinc, 6.0 * X - 3.0, _P), case(sc.ellipkinc, X, 3.0 * _P - 3.0),
        case(sc.ellipeinc, 10.0 * X - 5.0, _P), case(sc.ellipeinc, X, 3.0 * _P - 3.0),
        case(_spr.ellipkinc_dm, 6.0 * X - 3.0, _P, _check={"wrt": (0,)}),
        case(_spr.ellipeinc_dm, 6.0 * X - 3.0, _P, _check={"wrt": (0,)}),
        case(sc.struve, 1.5, 3.0 * X, _check=_W), case(sc.struve, 0.0, X, _check=_W),
        case(sc.struve, -0.5, 10.0 * X, _check=_W), case(sc.modstruve, 2.0, 5.0 * X, _check=_W),
        case(sc.modstruve, 0.0, X - 0.2, _check=_W),
        case(sc.owens_t, 4.0 * X - 2.0, 3.0 * _P - 1.5), case(sc.owens_t, X, 1.5),
        case(sc.wrightomega, 6.0 * X - 3.0),
        case(sc.hyp2f1, 1.5, 0.5, 2.5, _P - 0.5, _check={"wrt": (3,)}),
        case(sc.hyp2f1, 1.5, 0.5, 2.5, 0.5 * _Zc, _check={"wrt": (3,)}),
        case(sc.hyp1f1, 1.5, 2.5, 4.0 * X - 2.0, _check={"wrt": (2,)}),
        case(sc.hyp1f1, 0.5, 2.5, _Zc, _check={"wrt": (2,)}),
        case(sc.hyp0f1, 1.5, 4.0 * X - 2.0, _check=_W), case(sc.hyp0f1, 2.5, _Zc, _check=_W),
        case(sc.hyperu, 1.5, 2.5, X + 0.5, _check={"wrt": (2,)}),
        case(sc.wright_bessel, 0.5, 1.5, 3.0 * X, _check={"wrt": (2,)}),
        case(sc.log_wright_bessel, 0.5, 1.5, 5.0 * X, _check={"wrt": (2,)}),
        case(sc.boxcox, X + 0.5, 2.0 * _P - 1.0), case(sc.boxcox1p, X, 2.0 * _P - 1.0),
        case(sc.boxcox, X + 0.5, np.array([0.0, 1e-9, -1e-5])),
        case(sc.inv_boxcox, X, 2.0 * _P - 1.0), case(sc.inv_boxcox1p, X, 2.0 * _P - 1.0),
        case(sc.inv_boxcox, X, np.array([0.0, 1e-9, -1e-5])),
        case(sc.ndtri_exp, -3.0 * X), case(sc.ndtri_exp, -60.0 * X),
        case(sc.exp2, X), case(sc.exp10, X), case(sc.powm1, X + 0.5, 2.0 * _P - 1.0),
        case(sc.kn, 2, X + 0.3), case(sc.kn, 0, X + 0.3),
        case(sc.stdtrit, 4.0, _P), case(sc.stdtrit, X + 2.0, _P, _check={"rtol": 1e-5}),
        case(sc.chdtri, X + 2.0, _P, _check={"rtol": 1e-5}),
        case(sc.gammaincinv, X + 1.5, _P, _check={"rtol": 1e-5}),
        case(sc.gammainccinv, X + 1.5, _P, _check={"rtol": 1e-5}),
        case(sc.betaincinv, X + 1.5, 2.5, _P, _check={"rtol": 1e-5}),
        case(sc.betainccinv, 2.0, X + 1.5, _P, _check={"rtol": 1e-5}),
        case(sc.fdtri, X + 3.0, X + 4.0, _P, _check={"rtol": 1e-5}), case(sc.pdtri, 3, _P),
        *[case(f, 3, 7, _P) for f in (sc.bdtr, sc.bdtrc, sc.bdtri, sc.nbdtr, sc.nbdtrc)],
        *[case(f, n, 2.0 * _P - 1.0) for n in (0, 3) for f in (
            sc.eval_legendre, sc.eval_chebyt, sc.eval_chebyu, sc.eval_hermite,
            sc.eval_hermitenorm)],
        *[case(f, 2.5, 2.0 * _P - 1.0, _check=_W)
          for f in (sc.eval_legendre, sc.eval_chebyt, sc.eval_chebyu)],
        *[case(f, 4, _P) for f in (sc.eval_sh_legendre, sc.eval_sh_chebyt, sc.eval_sh_chebyu)],
        *[case(f, 3, 4.0 * _P - 2.0) for f in (sc.eval_chebyc, sc.eval_chebys)],
        case(sc.eval_laguerre, 3, 3.0 * _P), case(sc.eval_laguerre, 2.5, 3.0 * _P, _check=_W),
        *[case(f, n, 1.5, 3.0 * _P, _check={"wrt": (2,)}) for n in (3, 2.5)
          for f in (sc.eval_gegenbauer, sc.eval_genlaguerre)],
        *[case(sc.eval_jacobi, n, 1.5, 0.5, 2.0 * _P - 1.0, _check={"wrt": (3,)})
          for n in (3, 2.5)],
    ]
    import scipy.fft as _sfft  # the same transforms as np.fft, the same rules
    CASES += [
        case(_sfft.fft, Cx(2, 6)), case(_sfft.fft, R(6, 3), 4, 0, "ortho"),
        case(_sfft.ifft, Cx(5, 2), 7, 0, norm="forward"), case(_sfft.rfft, R(7, 2), n=5, axis=0),
        case(_sfft.irfft, Cx(4, 2), 7, 0), case(_sfft.hfft, Cx(4)), case(_sfft.ihfft, R(2, 7), n=5),
        case(_sfft.fft2, Cx(3, 4)), case(_sfft.ifft2, Cx(2, 3, 4), s=(4, 2)),
        case(_sfft.fftn, R(2, 3, 4), axes=(0, 2), s=(3, 5)), case(_sfft.ifftn, Cx(2, 3, 4)),
        case(_sfft.rfft2, R(3, 4)), case(_sfft.rfftn, R(2, 3, 5), s=(4, 6), axes=(1, 2)),
        case(_sfft.irfft2, Cx(3, 4)), case(_sfft.irfftn, Cx(2, 3, 4), s=(2, 5), axes=(0, 1)),
        case(_sfft.fftshift, R(3, 5), axes=1), case(_sfft.ifftshift, Cx(5, 4), axes=(0,)),
        case(_sfft.fft, R(8), workers=2, overwrite_x=False),
    ]


class _Rewind:
    """A ``size`` that rewinds its generator when the sampler reads it (before it draws): every
    call draws the same numbers, as finite differences of a sampler's parameters need."""

    def __init__(self, rng, n):
        self.rng, self.n = rng, n
        self.state = rng.bit_generator.state if isinstance(rng, np.random.Generator) \
            else rng.get_state()

    def __index__(self):
        if isinstance(self.rng, np.random.Generator):
            self.rng.bit_generator.state = self.state
        else:
            self.rng.set_state(self.state)  # (with the legacy sampler's cached deviate)
        return self.n


for _rng in (np.random.Generator(np.random.PCG64(3)), np.random.RandomState(3)):
    _size = _Rewind(_rng, 3)
    CASES += [
        *[case(getattr(type(_rng), name), _rng, np.array([0.3, -0.2, 0.5]), 1.7, _size)
          for name in ("normal", "laplace", "logistic", "gumbel")],
        case(type(_rng).uniform, _rng, 0.3, np.array([1.5, 2.0, 2.5]), _size),
        case(type(_rng).exponential, _rng, np.array([0.3, 1.2, 0.7]), _size),
    ]
# as_strided's rules refuse (MissingRuleError: tests/test_callbacks_and_protocols.py): the call
# alone is checked here
CASES += [case(np.lib.stride_tricks.as_strided, V5, (3, 3), (8, 8), _check={"wrt": ()})]

# -- nondifferentiable functions: a call each -----------------------------------------------------

_I = np.array([3, 1, 2])
NONDIFF_CALLS = {
    math.floor: (1.5,), math.ceil: (1.5,), math.trunc: (1.5,), math.isfinite: (1.5,),
    math.isinf: (1.5,), math.isnan: (1.5,), math.isclose: (1.5, 1.5), math.factorial: (4,),
    math.comb: (4, 2), math.perm: (4, 2), math.gcd: (4, 6), math.lcm: (4, 6), math.isqrt: (17,),
    math.ulp: (1.5,), cmath.isfinite: (1j,), cmath.isinf: (1j,), cmath.isnan: (1j,),
    cmath.isclose: (1j, 1j), builtins.round: (1.5,), builtins.int: (1.5,), builtins.bool: (1.5,),
    builtins.len: ([1.5],), builtins.hash: (1.5,), operator.index: (3,),
    operator.contains: ([1.5], 1.5), operator.countOf: ([1.5], 1.5),
    operator.indexOf: ([1.5], 1.5), operator.length_hint: ([1.5],), operator.not_: (1.5,),
    operator.truth: (1.5,), operator.invert: (3,), operator.inv: (3,),
    np.searchsorted: (np.sort(V5), 0.1), np.argpartition: (V5, 2), np.lexsort: ((V5, V5),),
    np.argsort: (V5,), np.digitize: (V5, [0.0, 1.0]),
    np.unravel_index: (3, (2, 2)), np.ravel_multi_index: ((np.array([1]), np.array([1])), (2, 2)),
    np.isin: (V5, [0.0]), np.min_scalar_type: (3,), np.can_cast: (np.float32, np.float64),
    np.result_type: (V5, 1), np.isscalar: (1.5,), np.isnat: (np.array(["NaT"], "M8[s]"),),
    np.shape: (M,), np.ndim: (M,), np.size: (M,), np.linalg.matrix_rank: (M,),
}
NONDIFF_CALLS.update({  # the indices permutation and choice draw (see rules/_random.py)
    drawn: (np.random.default_rng(0) if "Generator" in drawn.__qualname__
            else np.random.RandomState(0), 5) for drawn in DRAWN})
NONDIFF_CALLS.update({tuple.index: ((1.5, 2.5), 2.5), tuple.count: ((1.5, 2.5), 2.5),
                      list.index: ([1.5, 2.5], 2.5), list.count: ([1.5, 2.5], 2.5)})
NONDIFF_CALLS.update({  # the exemptions as methods of a number: x.is_integer(), x.__lt__(y)...
    kind.__dict__[name]: (kind(1.5),) + ((kind(2.5),) if name.strip("_") in (
        "eq", "ne", "lt", "le", "gt", "ge") else ("",) if name == "__format__" else ())
    for kind in (float, complex) for name in NUMBER_EXEMPTIONS if name in kind.__dict__})


_BINARY_NONDIFF = {operator.floordiv, operator.ifloordiv, operator.lt, operator.le, operator.eq,
                   operator.ne, operator.ge, operator.gt, operator.is_, operator.is_not,
                   np.isclose, np.allclose, np.array_equal, np.array_equiv, np.may_share_memory,
                   np.shares_memory}
_INT_BINARY = {operator.and_, operator.or_, operator.xor, operator.iand, operator.ior,
               operator.ixor, operator.lshift, operator.rshift, operator.ilshift,
               operator.irshift}

# -- hypothesis sweep of the elementwise families --------------------------------------------------

UNARY_DOMAINS = {
    np.negative: (-3, 3), np.positive: (-3, 3), np.exp: (-2, 2), np.exp2: (-2, 2),
    np.expm1: (-2, 2), np.log: (0.1, 3), np.log2: (0.1, 3), np.log10: (0.1, 3),
    np.log1p: (-0.8, 3), np.sqrt: (0.1, 3), np.cbrt: (0.2, 3), np.square: (-3, 3),
    np.reciprocal: (0.2, 3), np.sin: (-3, 3), np.cos: (-3, 3), np.tan: (-1.2, 1.2),
    np.arcsin: (-0.9, 0.9), np.arccos: (-0.9, 0.9), np.arctan: (-3, 3), np.sinh: (-2, 2),
    np.cosh: (-2, 2), np.tanh: (-2, 2), np.arcsinh: (-3, 3), np.arccosh: (1.1, 3),
    np.arctanh: (-0.9, 0.9), np.deg2rad: (-3, 3), np.radians: (-3, 3), np.rad2deg: (-3, 3),
    np.degrees: (-3, 3), np.fabs: (0.1, 3), np.absolute: (0.1, 3), np.sinc: (0.1, 3),
    np.conjugate: (-3, 3), np.real: (-3, 3), np.imag: (-3, 3), np.nan_to_num: (-3, 3),
    np.angle: (0.1, 3),
}
# holomorphic ufuncs, and the real-valued absolute, angle, real, imag (and conjugate)
COMPLEX_UNARY = [np.exp, np.log, np.sqrt, np.sin, np.cos, np.tan, np.arctan, np.sinh, np.cosh,
                 np.tanh, np.arcsinh, np.arctanh, np.arcsin, np.square, np.reciprocal, np.expm1,
                 np.log1p, np.log10, np.absolute, np.conjugate, np.real, np.imag, np.angle]
BINARY_DOMAINS = {
    np.add: ((-3, 3), (-3, 3)), np.subtract: ((-3, 3), (-3, 3)),
    np.multiply: ((-3, 3), (-3, 3)), np.divide: ((-3, 3), (0.3, 3)),
    np.true_divide: ((-3, 3), (0.3, 3)), np.power: ((0.3, 2), (-2, 2)),
    np.float_power: ((0.3, 2), (-2, 2)), np.arctan2: ((0.2, 3), (-3, 3)),
    np.hypot: ((0.2, 3), (-3, 3)), np.maximum: ((-3, 3), (-3, 3)),
    np.minimum: ((-3, 3), (-3, 3)), np.fmax: ((-3, 3), (-3, 3)), np.fmin: ((-3, 3), (-3, 3)),
    np.logaddexp: ((-3, 3), (-3, 3)), np.logaddexp2: ((-3, 3), (-3, 3)),
    operator.add: ((-3, 3), (-3, 3)), operator.sub: ((-3, 3), (-3, 3)),
    operator.mul: ((-3, 3), (-3, 3)), operator.truediv: ((-3, 3), (0.3, 3)),
    operator.pow: ((0.3, 2), (-2, 2)), builtins.pow: ((0.3, 2), (-2, 2)),
}
HYPOTHESIS_COVERED = set(UNARY_DOMAINS) | set(BINARY_DOMAINS)


def _floats(lo, hi):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def _array(shape, lo, hi):
    return hnp.arrays(np.float64, shape, elements=_floats(lo, hi))


_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("fn", list(UNARY_DOMAINS), ids=lambda f: f.__name__)
@_SETTINGS
@given(data=st.data())
def test_unary_elementwise(fn, data):
    lo, hi = UNARY_DOMAINS[fn]
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=3))
    x = data.draw(_array(shape, lo, hi))
    check_rule(fn, x)


@pytest.mark.parametrize("fn", COMPLEX_UNARY, ids=lambda f: f.__name__)
@_SETTINGS
@given(data=st.data())
def test_unary_complex(fn, data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    re = data.draw(_array(shape, 0.2, 0.8))
    im = data.draw(_array(shape, -0.8, 0.8))
    check_rule(fn, re + 1j * im)


@pytest.mark.parametrize("fn", list(BINARY_DOMAINS), ids=lambda f: f.__name__)
@_SETTINGS
@given(data=st.data())
def test_binary_broadcasting(fn, data):
    (lx, hx), (ly, hy) = BINARY_DOMAINS[fn]
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                         max_side=3))
    x = data.draw(_array(shapes.input_shapes[0], lx, hx))
    y = data.draw(_array(shapes.input_shapes[1], ly, hy))
    if fn in (np.maximum, np.minimum, np.fmax, np.fmin):
        # exact ties are fine (an even split is what central differences see) but near-ties
        # closer than the finite-difference step are not: move them apart
        y = np.where((np.abs(x - y) < 1e-3) & (x != y), y + 0.01, y)
    check_rule(fn, x, y)


@pytest.mark.parametrize("fn", [operator.add, operator.mul, operator.truediv, operator.pow,
                                math.atan2, math.hypot, math.pow], ids=lambda f: f.__name__)
@_SETTINGS
@given(x=_floats(0.3, 2.0), y=_floats(0.3, 2.0))
def test_binary_scalars(fn, x, y):
    check_rule(fn, x, y)


@pytest.mark.parametrize("fn", [np.sum, np.mean, np.prod, np.max, np.min, np.var, np.std,
                                np.nansum, np.ptp], ids=lambda f: f.__name__)
@_SETTINGS
@given(data=st.data())
def test_reductions(fn, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=3))
    # distinct values at least 0.1 apart: finite differences never cross a tie (zeros allowed)
    x = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(-30, 30), unique=True)) * 0.1
    nd = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                               st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd,
                                        unique=True).map(tuple)))
    kwargs = {"axis": axis}
    if fn is not np.ptp or not isinstance(axis, tuple):
        kwargs["keepdims"] = data.draw(st.booleans())
    if fn is np.ptp and isinstance(axis, tuple):
        kwargs["axis"] = None
    check_rule(fn, x, **kwargs)


# -- the table sweep and the meta-test ------------------------------------------------------------

def _id(c):
    fn = c[0]
    return getattr(fn, "__name__", type(fn).__name__)


@pytest.mark.parametrize("fn,args,kwargs,opts", CASES, ids=[_id(c) for c in CASES])
def test_rule(fn, args, kwargs, opts):
    check_rule(fn, *args, **opts, **kwargs)


def test_nondifferentiable_calls():
    for fn in shipped_rules(differentiable=False):
        if fn in NONDIFF_CALLS:
            args = NONDIFF_CALLS[fn]
        elif fn in _INT_BINARY:
            args = (6, 3)
        elif fn in _BINARY_NONDIFF:
            args = (V5, V5) if fn.__module__ != "_operator" else (1.5, 2.5)
        elif isinstance(fn, np.ufunc) and fn.nin == 2:
            try:
                fn(V5, V5)
                args = (V5, V5)
            except TypeError:
                args = (_I, _I)
        elif isinstance(fn, np.ufunc):
            try:
                fn(V5)
                args = (V5,)
            except TypeError:
                args = (_I,)
        else:
            args = (V5,)
        check_rule(fn, *args)


def test_every_registered_callable_has_a_case():
    covered = {id(c[0]) for c in CASES} | {id(f) for f in HYPOTHESIS_COVERED}
    missing = [f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', fn)}"
               for fn in shipped_rules(differentiable=True) if id(fn) not in covered]
    assert not missing, f"registered rules without a checked case: {missing}"


# -- gauge-invariant checks of complex eigen/singular vectors --------------------------------------

def test_complex_eigh_vectors_phase_invariant():
    a = spd(4, complex_=True)
    v = Cx(4, 4)
    (w, q), (dw, dv) = jvp(np.linalg.eigh, (a,), (v,))

    def f(m):  # a phase-invariant function of the eigenvectors
        w, q = np.linalg.eigh(m)
        return (q * np.sqrt(np.arange(1, 5))) @ np.conj(q.T)
    d = np.sqrt(np.arange(1, 5))
    got = dv * d @ np.conj(q.T) + (q * d) @ np.conj(dv.T)
    np.testing.assert_allclose(got, fd(lambda t: f(a + t * v), 0.0, 1e-5, order=4), atol=1e-7)


def test_complex_svd_vectors_phase_invariant():
    a = Cx(4, 3)
    v = Cx(4, 3)
    (u, s, vh), (du, ds, dvh) = jvp(lambda m: np.linalg.svd(m, full_matrices=False), (a,), (v,))

    def f(m):
        u, s, vh = np.linalg.svd(m, full_matrices=False)
        return (u * s ** 3) @ vh
    got = (du * s ** 3) @ vh + (u * (3 * s ** 2 * ds)) @ vh + (u * s ** 3) @ dvh
    np.testing.assert_allclose(got, fd(lambda t: f(a + t * v), 0.0, 1e-5, order=4), atol=1e-6)


# -- the checker catches wrong rules ---------------------------------------------------------------

def _scratch(*args):
    return np.sin(args[0])


def _scratch_abs(z):
    return np.abs(z)


def test_checker_rejects_wrong_rules():
    x = np.linspace(0.1, 1.0, 4)
    with isolated_rules():
        defjvp(_scratch, lambda dx, out, x: dx * np.sin(x))  # wrong
        defvjp(_scratch, lambda ct, out, x: ct * np.cos(x))
        with pytest.raises(RuleCheckError, match="forward"):
            check_rule(_scratch, x)
        defjvp(_scratch, lambda dx, out, x: dx * np.cos(x))
        defvjp(_scratch, lambda ct, out, x: ct * np.cos(x) * 1.01)  # wrong transpose
        with pytest.raises(RuleCheckError, match="dot-product"):
            check_rule(_scratch, x)
        # written for one direction: a user's rule runs once per direction, so it is right
        # under a batch too (see tests/ad/test_found_outside_session15_forward.py)
        defjvp(_scratch, lambda dx, out, x: np.cos(x) * np.ravel(dx)[:4])
        defvjp(_scratch, lambda ct, out, x: ct * np.cos(x))
        check_rule(_scratch, x)
        check_rule(_scratch, x, batch=False)
        defjvp(_scratch, lambda dx, out, x: dx * np.cos(x))
        check_rule(_scratch, x)
        # complex: the conjugated (PyTorch-style) reverse rule of abs fails the bilinear test
        defjvp(_scratch_abs, lambda dx, out, x: np.real(np.conj(x) * dx) / np.abs(x))
        defvjp(_scratch_abs, lambda ct, out, x: ct * np.conj(x) / np.abs(x))
        check_rule(_scratch_abs, x + 1j)
        defvjp(_scratch_abs, lambda ct, out, x: ct * x / np.abs(x))
        with pytest.raises(RuleCheckError, match="dot-product"):
            check_rule(_scratch_abs, x + 1j)
