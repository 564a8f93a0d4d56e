"""HIPS autograd's test suite, run through overdub_ad's API.

Ported from the tests of autograd 1.9.1 (github.com/HIPS/autograd, ``tests/``), grouped by
source file: ``test_systematic.py`` (with its helpers in ``numpy_utils.py``), ``test_numpy.py``,
``test_linalg.py``, ``test_scalar_ops.py``, ``test_binary_ops.py``, ``test_truediv.py``,
``test_fft.py``, ``test_complex.py``, ``test_graphs.py``, ``test_wrappers.py``,
``test_jacobian.py``, ``test_direct.py``, ``test_core.py``, ``test_dict.py``, ``test_list.py``,
``test_tuple.py``, ``test_builtins.py``, ``test_logic.py`` and ``test_misc.py``.

The functions are plain NumPy (``import numpy as np``, not ``autograd.numpy``): overdub
differentiates unmodified code.  autograd's ``check_grads(f)(*args)`` becomes our
``check_grads(f, args, order=2)`` in forward and reverse mode (autograd checks order 2 by
default, and order 1 or 3 where it says so; it checks only reverse mode for ``linalg`` and
``fft``, where both are checked here), and its
``combo_check(fun, argnums)(*arg_lists, **kwarg_lists)`` becomes one case per combination,
differentiating the arguments ``argnums`` with the others held fixed.  Our ``check_grads``
differentiates every float argument, where autograd's checks the first one only: the checks
here are at least as strict.  Known values autograd compares against are compared here too.

Wrapper tests map to our equivalents: ``elementwise_grad`` to ``vjp`` with a cotangent of ones,
``make_hvp``/``hessian_tensor_product`` to ``hvp``, ``make_jvp`` to ``jvp``,
``tensor_jacobian_product`` to ``vjp``, ``grad_and_aux`` to ``grad(..., has_aux=True)``,
``holomorphic_grad`` to ``grad(..., holomorphic=True)``, ``deriv`` to ``derivative``,
``make_ggnvp`` to ``jvp`` then ``hvp`` then ``vjp``.  Tests of autograd internals with no
counterpart (``const_graph``, ``misc.flatten``, vspaces, box types, deprecated wrappers,
wrapped names and docstrings) are left out; where autograd requires an error that overdub has no
reason to raise (assigning into an array being differentiated, ``rfftn`` of odd length, a
boolean output), the port checks that the derivative is right instead.  Random test points
are drawn away from the jumps of ``mod`` and ``int64()``, which finite differences cannot
cross.
"""

from __future__ import annotations

import functools
import operator as op
from itertools import product

import numpy as np
import pytest

from overdub import Tagged
from overdub_ad import (MissingRuleError, checkpoint, check_grads, defjvp, defvjp, derivative,
                        grad, hessian, hvp, jacobian, jvp, value_and_grad, vjp)

RNG = np.random.default_rng(0)
BOTH = ("fwd", "rev")
REV = ("rev",)


def R(*shape):
    """Standard normal numbers: a float for no shape (autograd's ``npr.randn()``)."""
    return float(RNG.standard_normal()) if not shape else RNG.standard_normal(shape)


def C(*shape):
    return R(*shape) + 1j * R(*shape)


def rand(*shape):
    """Uniform numbers in [0, 1): a float for no shape (autograd's ``npr.rand()``)."""
    return float(RNG.random()) if not shape else RNG.random(shape)


def _check_wrt(fun, args, kwargs, argnums, order=2, modes=BOTH):
    """``check_grads`` of ``fun`` in the arguments ``argnums``, the others held fixed."""
    def partial(*diff):
        full = list(args)
        for i, d in zip(argnums, diff):
            full[i] = d
        return fun(*full, **kwargs)
    check_grads(partial, tuple(args[i] for i in argnums), order=order, modes=modes)


def _combos(name, fun, argnums, *arg_lists, order=2, modes=BOTH, **kwarg_lists):
    """autograd's ``combo_check``: one case per combination of the arguments and keywords."""
    keys = list(kwarg_lists)
    return [pytest.param(fun, args, dict(zip(keys, values)), tuple(argnums), order, modes,
                         id=f"{name}-{k}")
            for k, (args, values) in enumerate(
                (a, v) for a in product(*arg_lists) for v in product(*kwarg_lists.values()))]


def _transform(lims, x):
    return x * (lims[1] - lims[0]) + lims[0]


# -- test_systematic.py (numpy_utils.py's checks) ---------------------------------------------

def _stat(name, fun, test_complex=True):
    x, a, b, c, d = 3.5, R(), R(3), R(2, 3), R(1, 3)
    cases = (_combos(name, fun, (0,), [x, a])
             + _combos(name + "-axis0", fun, (0,), [b, c, d], axis=[None, 0],
                       keepdims=[True, False])
             + _combos(name + "-axis1", fun, (0,), [c, d], axis=[None, 0, 1],
                       keepdims=[True, False]))
    if test_complex:
        cz, e = R() + 0.1j * R(), R(2, 3) + 0.1j * R(2, 3)
        cases += (_combos(name + "-complex", fun, (0,), [x, cz, a])
                  + _combos(name + "-complex-axis", fun, (0,), [b, c, d, e], axis=[None, 0],
                            keepdims=[True, False]))
    return cases


def _unary(name, fun, lims=(-2.0, 2.0), test_complex=True):
    args = [_transform(lims, 0.4), _transform(lims, rand(2)), _transform(lims, rand(3, 2)),
            _transform(lims, rand(1, 2))]
    cases = _combos(name, fun, (0,), args)
    if test_complex:
        comp = _transform(lims, 0.4) + 0.1j * _transform(lims, 0.3)
        matc = _transform(lims, rand(3, 2)) + 0.1j * rand(3, 2)
        cases += _combos(name + "-complex", fun, (0,), [comp, matc])
    return cases


def _binary(name, fun, lims_a=(-2.0, 2.0), lims_b=(-2.0, 2.0), test_complex=True):
    values = [0.6, rand(2), rand(3, 2), rand(1, 2)]
    cases = _combos(name, fun, (0, 1), [_transform(lims_a, v) for v in values],
                    [_transform(lims_b, v) for v in values])
    if test_complex:
        values = [0.6, 0.6 + 0.3j, rand(2), rand(3, 2) + 0.1j * rand(3, 2), rand(1, 2)]
        cases += _combos(name + "-complex", fun, (0, 1), [_transform(lims_a, v) for v in values],
                         [_transform(lims_b, v) for v in values])
    return cases


def _binary_distinct(name, fun, lims_a=(-2.0, 2.0), lims_b=(-2.0, 2.0)):
    """numpy_utils' ``binary_ufunc_check_no_same_args`` (real arguments only, as every use) for
    ``mod`` and ``remainder``.  They jump where ``a / b`` is an integer, and their derivative in
    ``b`` there: points within finite-difference reach of a jump are drawn again."""
    while True:
        a = [_transform(lims_a, v) for v in (0.6, rand(2), rand(3, 2), rand(1, 2))]
        b = [_transform(lims_b, v) for v in (0.7, rand(2), rand(3, 2), rand(1, 2))]
        ratios = [np.divide(x, y) for x in a for y in b]
        if all(np.min(np.abs(r - np.round(r))) > 0.01 for r in ratios):
            return _combos(name, fun, (0, 1), a, b)


def _degrees(x):
    return np.degrees(x) / 50.0


def _rad2deg(x):
    return np.rad2deg(x) / 50.0


SYSTEMATIC_UFUNCS = [
    *_stat("max", np.max), *_stat("mean", np.mean), *_stat("min", np.min),
    *_stat("sum", np.sum), *_stat("prod", np.prod), *_stat("var", np.var),
    *_stat("std", np.std),
    *_unary("sin", np.sin), *_unary("abs", np.abs, lims=(0.1, 4.0)),
    *_unary("absolute", np.absolute, lims=(0.1, 4.0)),
    *_unary("arccosh", np.arccosh, lims=(1.1, 4.0)),
    *_unary("arcsinh", np.arcsinh, lims=(-0.9, 0.9)),
    *_unary("arctanh", np.arctanh, lims=(-0.9, 0.9)),
    *_unary("ceil", np.ceil, lims=(-1.5, 1.5), test_complex=False),
    *_unary("cos", np.cos), *_unary("cosh", np.cosh),
    *_unary("deg2rad", np.deg2rad, test_complex=False),
    *_unary("degrees", _degrees, test_complex=False),
    *_unary("exp", np.exp), *_unary("exp2", np.exp2), *_unary("expm1", np.expm1),
    *_unary("fabs", np.fabs, test_complex=False),
    *_unary("floor", np.floor, lims=(-1.5, 1.5), test_complex=False),
    *_unary("log", np.log, lims=(0.2, 2.0)), *_unary("log10", np.log10, lims=(0.2, 2.0)),
    *_unary("log1p", np.log1p, lims=(0.2, 2.0)), *_unary("log2", np.log2, lims=(0.2, 2.0)),
    *_unary("rad2deg", _rad2deg, test_complex=False),
    *_unary("radians", np.radians, test_complex=False),
    *_unary("sign", np.sign, test_complex=False),
    *_unary("sinh", np.sinh), *_unary("sqrt", np.sqrt, lims=(1.0, 3.0)),
    *_unary("square", np.square, test_complex=False),
    *_unary("tan", np.tan, lims=(-1.1, 1.1)), *_unary("tanh", np.tanh),
    *_unary("real", np.real), *_unary("real_if_close", np.real_if_close),
    *_unary("imag", np.imag), *_unary("conj", np.conj), *_unary("conjugate", np.conjugate),
    *_unary("angle", np.angle),
    *_binary("add", np.add),
    *_binary("logaddexp", np.logaddexp, test_complex=False),
    *_binary("logaddexp2", np.logaddexp2, test_complex=False),
    *_binary_distinct("remainder", np.remainder, lims_a=(-0.9, 0.9), lims_b=(0.7, 1.9)),
    *_binary("true_divide", np.true_divide, lims_b=(0.8, 1.2), test_complex=False),
    *_binary_distinct("mod", np.mod, lims_b=(0.8, 2.1)),
    *_binary("true_divide_neg", np.true_divide, lims_b=(-0.3, -2.0), test_complex=False),
    *_binary_distinct("mod_neg", np.mod, lims_b=(-0.3, -2.0)),
    *_binary("op_mul", op.mul), *_binary("op_add", op.add), *_binary("op_sub", op.sub),
    *_binary_distinct("op_mod", op.mod, lims_b=(0.3, 2.0)),
    *_binary_distinct("op_mod_neg", op.mod, lims_b=(-0.3, -2.0)),
]


@pytest.mark.parametrize("fun, args, kwargs, argnums, order, modes", SYSTEMATIC_UFUNCS)
def test_systematic_ufuncs_and_stats(fun, args, kwargs, argnums, order, modes):
    _check_wrt(fun, args, kwargs, argnums, order, modes)


def _ge0(x):
    return x > 0


SYSTEMATIC_ARRAY_FUNCTIONS = [
    *_combos("transpose", np.transpose, (0,), [R(2, 3, 4)],
             axes=[None, [0, 1, 2], [0, 2, 1], [2, 0, 1], [2, 1, 0], [1, 0, 2], [1, 2, 0]]),
    *_combos("moveaxis", np.moveaxis, (0,), [R(2, 3, 4)], source=[0, 1, 2],
             destination=[0, 1, 2]),
    *_combos("repeat", np.repeat, (0,), [R(2, 3, 4), R(3, 1)], repeats=[0, 1, 2],
             axis=[None, 0, 1]),
    *_combos("diff", np.diff, (0,), [R(5, 5), R(5, 5, 5)], n=[1, 2], axis=[0, 1]),
    *_combos("diff-short", np.diff, (0,), [R(1), R(1, 1)], axis=[0]),
    *_combos("diff-short-axis1", np.diff, (0,), [R(1, 1), R(3, 1)], axis=[1]),
    *_combos("gradient", np.gradient, (0,), [R(5, 5), R(5, 5, 5)], axis=[None, 0, 1, -1]),
    *_combos("gradient-axes", np.gradient, (0,), [R(5, 5, 5)], axis=[(0, 1), (0, -1)]),
    *_combos("tile", np.tile, (0,), [R(2, 1, 3, 1)], reps=[(1, 4, 1, 2)]),
    *_combos("tile-2d", np.tile, (0,), [R(1, 2)], reps=[(1, 2), (2, 3), (3, 2, 1)]),
    *_combos("tile-1d", np.tile, (0,), [R(1)], reps=[(2,), 2]),
    *_combos("kron", np.kron, (0, 1), [R(5, 5), R(4, 4), R(5), R(5, 1), R(1, 5), R(), C(5, 5)],
             [R(3, 3), R(2, 2), R(3), R(1, 3), R(3, 1), R(), C(3, 3)]),
    *_combos("inner", np.inner, (0, 1), [1.5, R(3), R(2, 3)], [0.3, R(3), R(4, 3)]),
    *_combos("dot", np.dot, (0, 1), [1.5, R(3), R(2, 3), R(2, 2, 3), C(3), C(2, 3)],
             [0.3, R(3), R(3, 4), R(2, 3, 4), C(3)], order=3),
    *_combos("outer", np.outer, (0, 1), [R(3), C(3)], [R(3), C(3)], order=3),
    *_combos("matmul", np.matmul, (0, 1), [R(3), R(2, 3), R(2, 2, 3), C(3), C(2, 3)],
             [R(3), R(3, 4), R(2, 3, 4), C(3), C(3, 4)]),
    *_combos("matmul-broadcast", np.matmul, (0, 1), [R(1, 2, 2)], [R(3, 2, 1)]),
    *_combos("tensordot-1", np.tensordot, (0, 1), [R(1, 3), R(2, 3, 2), C(1, 3)],
             [R(3), R(3, 1), R(3, 4, 2), C(3)], axes=[[(1,), (0,)]], order=3),
    *_combos("tensordot-2", np.tensordot, (0, 1), [R(3), R(3, 1), R(3, 4, 2)],
             [R(1, 3), R(2, 3, 2)], axes=[[(0,), (1,)]], order=3),
    *_combos("tensordot-3", np.tensordot, (0, 1), [R(2, 3), R(2, 3, 4)],
             [R(1, 2, 3), R(2, 2, 3, 4)], axes=[[(0, 1), (1, 2)], [(1, 0), (2, 1)]], order=3),
    *_combos("tensordot-4", np.tensordot, (0, 1), [R(2, 2), R(4, 2, 2)], [R(2, 2), R(2, 2, 4)],
             axes=[1, 2], order=3),
    *_combos("tensordot-5", np.tensordot, (0, 1), [R(4)], [R()], axes=[0], order=3),
    *_combos("tensordot-6", np.tensordot, (0, 1), [R(2, 6)], [R(6, 3)], axes=[[[-1], [0]]],
             order=3),
    *_combos("tensordot-7", np.tensordot, (0, 1), [R(2, 6)], [R(6, 3)], axes=[[-1, 0]],
             order=3),
    *_combos("tensordot-8", np.tensordot, (0, 1), [R(2)], [R(2, 2)], axes=[[0, 1]], order=3),
    *_combos("maximum", np.maximum, (0, 1), [R(1), R(1, 4), R(3, 4)], [R(1), R(1, 4), R(3, 4)]),
    *_combos("fmax", np.fmax, (0, 1), [R(1), R(1, 4), R(3, 4)], [R(1), R(1, 4), R(3, 4)]),
    *_combos("minimum", np.minimum, (0, 1), [R(1), R(1, 4), R(3, 4)], [R(1), R(1, 4), R(3, 4)]),
    *_combos("fmin", np.fmin, (0, 1), [R(1), R(1, 4), R(3, 4)], [R(1), R(1, 4), R(3, 4)]),
    *_combos("sort", np.sort, (0,), [R(1), R(7)]),
    *_combos("partition", np.partition, (0,), [R(7), R(14)], kth=[0, 3, 6]),
    *_combos("atleast_1d", np.atleast_1d, (0,), [1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5)]),
    *_combos("atleast_2d", np.atleast_2d, (0,), [1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5)]),
    *_combos("atleast_3d", np.atleast_3d, (0,),
             [1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5), R(2, 4, 3, 5)]),
    *_combos("einsum-transpose", np.einsum, (1,), ["ij->ji"], [R(1, 1), R(4, 4), R(3, 4)]),
    *_combos("einsum-matmult", np.einsum, (1, 2), ["ij,jk->ik"], [R(2, 3), C(2, 3)],
             [R(3, 4), C(3, 4)]),
    *_combos("einsum-matmult-broadcast", np.einsum, (1, 2), ["...ij,...jk->...ik"],
             [R(2, 3), R(2, 2, 3)], [R(3, 4), R(2, 3, 4)]),
    *_combos("einsum-matmult-broadcast-leadzero", np.einsum, (1, 2), ["...ij,...jk->...ik"],
             [R(0, 2, 3)], [R(0, 3, 4)]),
    *_combos("einsum-covsum", np.einsum, (1, 2), ["ijk,lji->lki"], [R(3, 4, 4)], [R(4, 4, 3)]),
    *_combos("einsum-ellipses", np.einsum, (1, 2), ["...jk,...lj->...lk", "...,...->..."],
             [R(4, 4), R(3, 4, 4)], [R(4, 4), R(3, 4, 4)]),
    *_combos("einsum-ellipses-tail", np.einsum, (1, 2), ["jk...,lj...->lk..."],
             [R(3, 2), R(3, 2, 4)], [R(2, 3), R(2, 3, 4)]),
    *_combos("einsum-ellipses-center", np.einsum, (1, 2), ["j...k,lj...->lk..."],
             [R(2, 2), R(2, 2, 2)], [R(2, 2), R(2, 2, 2)]),
    *_combos("einsum-three-args", np.einsum, (1, 2), ["ijk,lji,lli->lki"], [R(3, 4, 4)],
             [R(4, 4, 3)], [R(4, 4, 3)]),
    *_combos("einsum2-transpose", np.einsum, (0,), [R(1, 1), R(4, 4), R(3, 4)], [(0, 1)],
             [(1, 0)]),
    *_combos("einsum2-matmult", np.einsum, (0, 2), [R(2, 3)], [(0, 1)], [R(3, 4)], [(1, 2)],
             [(0, 2)]),
    *_combos("einsum2-matmult-broadcast", np.einsum, (0, 2), [R(2, 3), R(2, 2, 3)],
             [(Ellipsis, 0, 1)], [R(3, 4), R(2, 3, 4)], [(Ellipsis, 1, 2)], [(Ellipsis, 0, 2)]),
    *_combos("einsum2-covsum", np.einsum, (0, 2), [R(3, 4, 4)], [(0, 1, 2)], [R(4, 4, 3)],
             [(3, 1, 0)], [(3, 2, 0)]),
    *_combos("einsum2-three-args", np.einsum, (0, 2), [R(3, 4, 4)], [(0, 1, 2)], [R(4, 4, 3)],
             [(3, 1, 0)], [R(4, 4, 3)], [(3, 3, 0)], [(3, 2, 0)]),
    *_combos("einsum-naked-sum", np.einsum, (1, 2), ["k,nk->"], [R(5)], [R(10, 5)]),
    *_combos("einsum-naked-sum2", np.einsum, (1,), ["abcd->bd"], [R(3, 2, 3, 2)]),
    *_combos("einsum-naked-sum-ellipsis", np.einsum, (1, 2), ["...k,...nk->..."], [R(3, 5)],
             [R(3, 10, 5)]),
    *_combos("einsum-no-output-indices", np.einsum, (1, 2), ["ij,k"], [R(3, 4)], [R(3)]),
    *_combos("trace", np.trace, (0,), [R(5, 5), R(4, 5), R(5, 4), R(3, 4, 5)], offset=[-1, 0, 1]),
    *_combos("diag", np.diag, (0,), [R(5, 5)], k=[-1, 0, 1]),
    *_combos("diag-flat", np.diag, (0,), [R(5)], k=[-1, 0, 1]),
    *_combos("tril", np.tril, (0,), [R(5, 5)], k=[-1, 0, 1]),
    *_combos("triu", np.triu, (0,), [R(5, 5)], k=[-1, 0, 1]),
    *_combos("tril-3d", np.tril, (0,), [R(5, 5, 4)], k=[-1, 0, 1]),
    *_combos("triu-3d", np.triu, (0,), [R(5, 5, 4)], k=[-1, 0, 1]),
    *_combos("swapaxes", np.swapaxes, (0,), [R(3, 4, 5)], axis1=[0, 1, 2], axis2=[0, 1, 2]),
    *_combos("rollaxis", np.rollaxis, (0,), [R(2, 3, 4)], axis=[0, 1, 2], start=[0, 1, 2]),
    *_combos("cross", np.cross, (0, 1), [R(3, 3)], [R(3, 3)], axisa=[-1, 0, 1],
             axisb=[-1, 0, 1], axisc=[-1, 0, 1], axis=[None, -1, 0, 1]),
    *_combos("vsplit-2d", np.vsplit, (0,), [R(4, 8)], [4, [1, 2]]),
    *_combos("vsplit-3d", np.vsplit, (0,), [R(4, 4, 4)], [2, [1, 2]]),
    *_combos("hsplit-2d", np.hsplit, (0,), [R(4, 8)], [4, [1, 2]]),
    *_combos("hsplit-3d", np.hsplit, (0,), [R(4, 4, 4)], [2, [1, 2]]),
    *_combos("dsplit-3d", np.dsplit, (0,), [R(4, 4, 4)], [2, [1, 2]]),
    *_combos("split-1d", np.split, (0,), [R(1), R(7)], [1], axis=[0]),
    *_combos("split-2d", np.split, (0,), [R(4, 8)], [4, [1, 2]], axis=[0, 1]),
    *_combos("split-3d", np.split, (0,), [R(4, 4, 4)], [2, [1, 2]], axis=[0, 1, 2]),
    *_combos("array_split-1d", np.array_split, (0,), [R(1), R(7)], [1, 3], axis=[0]),
    *_combos("array_split-2d", np.array_split, (0,), [R(7, 7)], [4, [3, 5]], axis=[0, 1]),
    *_combos("array_split-3d", np.array_split, (0,), [R(7, 7, 7)], [4, [3, 5]],
             axis=[0, 1, 2]),
    *_combos("concatenate-list", np.concatenate, (0,), [(R(1), R(3))], axis=[0]),
    *_combos("concatenate-tuple", np.concatenate, (0,), [[R(1), R(3)]], axis=[0]),
    *_combos("concatenate-2d", np.concatenate, (0,), [(R(2, 2), R(2, 2))], axis=[0, 1]),
    *_combos("concatenate-3d", np.concatenate, (0,), [(R(2, 2, 2), R(2, 2, 2))],
             axis=[0, 1, 2]),
    *_combos("vstack-1d", np.vstack, (0,), [R(2), (R(2), R(2))]),
    *_combos("vstack-2d", np.vstack, (0,), [R(2, 3), (R(2, 4), R(1, 4))]),
    *_combos("vstack-3d", np.vstack, (0,), [R(2, 3, 4), (R(2, 3, 4), R(5, 3, 4))]),
    *_combos("hstack-1d", np.hstack, (0,), [R(2), (R(2), R(2))]),
    *_combos("hstack-2d", np.hstack, (0,), [R(3, 2), (R(3, 4), R(3, 5))]),
    *_combos("hstack-3d", np.hstack, (0,), [R(2, 3, 4), (R(2, 1, 4), R(2, 5, 4))]),
    *_combos("stack-1d", np.stack, (0,), [(R(2),), (R(2), R(2))], axis=[0, 1]),
    *_combos("row_stack-1d", np.vstack, (0,), [R(2), (R(2), R(2))]),
    *_combos("row_stack-2d", np.vstack, (0,), [R(2, 3), (R(2, 4), R(1, 4))]),
    *_combos("column_stack-1d", np.column_stack, (0,), [R(2), (R(2), R(2))]),
    *_combos("column_stack-2d", np.column_stack, (0,), [R(2, 2), (R(2, 2), R(2, 2))]),
    *_combos("select", np.select, (1,), [[_ge0(R(3, 4, 5)), _ge0(R(3, 4, 5)), _ge0(R(3, 4, 5))]],
             [[R(3, 4, 5), R(3, 4, 5), R(3, 4, 5)]], default=[0.0, 1.1]),
    *_combos("pad", np.pad, (0,), [R(2, 2)],
             [0, 3, (3,), (3, 2), ((3, 2),), ((1, 2), (3, 4)), ((0, 0), (0, 0))], ["constant"]),
]


@pytest.mark.parametrize("fun, args, kwargs, argnums, order, modes", SYSTEMATIC_ARRAY_FUNCTIONS)
def test_systematic_array_functions(fun, args, kwargs, argnums, order, modes):
    _check_wrt(fun, args, kwargs, argnums, order, modes)


# -- test_numpy.py -------------------------------------------------------------------------------

def _check(fun, *args, order=2, modes=BOTH):
    """autograd's ``check_grads(fun)(*args)``, with every float argument differentiated."""
    check_grads(fun, args, order=order, modes=modes)


def _dot(x, y):
    return np.dot(x, y)


def test_numpy_dot():
    mat1, mat2, vect1, vect2, vect3 = R(10, 11), R(10, 11), R(10), R(11), R(11)
    _check(_dot, mat1, vect2)
    _check(_dot, mat1, mat2.T)
    _check(_dot, vect1, mat1)
    _check(_dot, vect2, vect3)


def test_numpy_dot_with_floats():
    mat1, vect1, float1 = R(10, 11), R(10), R()
    _check(_dot, mat1, float1)
    _check(_dot, float1, mat1)
    _check(_dot, vect1, float1)
    _check(_dot, float1, vect1)


def test_numpy_outer():
    vect2, vect3 = R(11), R(11)
    _check(np.outer, vect2, vect3)
    _check(np.outer, vect2.T, vect3)
    _check(np.outer, vect2.T, vect3.T)


NUMPY_UNARY = {
    "max": (lambda x: np.max(x), R(10, 11)),
    "max_axis": (lambda x: np.max(x, axis=1), R(3, 4, 5)),
    "max_axis_keepdims": (lambda x: np.max(x, axis=1, keepdims=True), R(3, 4, 5)),
    "min": (lambda x: np.min(x), R(10, 11)),
    "min_axis": (lambda x: np.min(x, axis=1), R(3, 4, 5)),
    "min_axis_keepdims": (lambda x: np.min(x, axis=1, keepdims=True), R(3, 4, 5)),
    "sum_1": (lambda x: np.sum(x), R(10, 11)),
    "sum_2": (lambda x: np.sum(x, axis=0), R(10, 11)),
    "sum_3": (lambda x: np.sum(x, axis=0, keepdims=True), R(10, 11)),
    "sum_with_axis_tuple": (lambda x: np.sum(x, axis=(1, 2)), R(10, 11, 7)),
    "flipud": (lambda x: np.flipud(x), R(10, 11)),
    "fliplr": (lambda x: np.fliplr(x), R(10, 11)),
    "rot90": (lambda x: np.rot90(x), R(10, 11)),
    "cumsum_axis0": (lambda x: np.cumsum(x, axis=0), R(10, 11)),
    "cumsum_axis1": (lambda x: np.cumsum(x, axis=1), R(10, 11)),
    "cumsum_1d": (lambda x: np.cumsum(x), R(10)),
    "cumsum_no_axis": (lambda x: np.cumsum(x), R(10, 11)),
    "mean_1": (lambda x: np.mean(x), R(10, 11)),
    "mean_2": (lambda x: np.mean(x, axis=0), R(10, 11)),
    "mean_3": (lambda x: np.mean(x, axis=0, keepdims=True), R(10, 11)),
    "index_ints": (lambda x: x[3, 0, 1], R(5, 6, 4)),
    "index_slice": (lambda x: x[::-1, 2:4, :], R(5, 6, 4)),
    "index_lists": (lambda x: x[[0, 1, 2], :, :], R(5, 6, 4)),
    "index_mixed": (lambda x: x[3, 2:, [1, 3]], R(5, 6, 4)),
    "vector_slice": (lambda x: x[2:4], R(5)),
    "index_slice_fanout": (lambda x: x[::-1, 2:4, :] + x[::-1, 3:5, :], R(5, 6, 4)),
    "index_multiple_slices": (lambda x: x[2:6][1:3], R(7)),
    "reshape_method": (lambda x: x.reshape((5 * 4, 6)), R(5, 6, 4)),
    "reshape_call": (lambda x: np.reshape(x, (5 * 4, 6)), R(5, 6, 4)),
    "reshape_method_nolist": (lambda x: x.reshape(5 * 4, 6), R(5, 6, 4)),
    "ravel_method": (lambda x: x.ravel(), R(5, 6, 4)),
    "ravel_call": (lambda x: np.ravel(x), R(5, 6, 4)),
    "flatten_method": (lambda x: x.flatten(), R(5, 6, 4)),
    "trace": (lambda x: np.trace(x, offset=4), R(10, 11)),
    "trace2": (lambda x: np.trace(x, offset=-6), R(11, 10)),
    "trace_extradims": (lambda x: np.trace(x, offset=2), R(5, 6, 4, 3)),
    "diag": (lambda x: np.diag(x), R(10, 10)),
    "transpose": (lambda x: x.T, R(8, 8)),
    "roll": (lambda x: np.roll(x, 2, axis=1), R(4, 5)),
    "roll_no_axis": (lambda x: np.roll(x, 2), R(4, 5)),
    "triu": (lambda x: np.triu(x, k=2), R(5, 5)),
    "tril": (lambda x: np.tril(x, k=2), R(5, 5)),
    "clip": (lambda x: np.clip(x, a_min=0.1, a_max=1.1), R(5, 5)),
    "prod_1": (lambda x: np.prod(x), R(2, 3) ** 2 / 10.0 + 0.1),
    "prod_2": (lambda x: np.prod(x, axis=0), R(2, 3) ** 2 + 0.1),
    "prod_3": (lambda x: np.prod(x, axis=0, keepdims=True), R(2, 3) ** 2 + 0.1),
    "prod_4": (lambda x: np.prod(x), R(7) ** 2 + 0.1),
    "1d_array": (lambda x: np.array([x, x * 1.0, x + 2.5]), 3.0),
    "2d_array": (lambda x: np.array([[x, x * 1.0, x + 2.5], [x ** 2, x, x / 2.0]]), 3.0),
    "1d_array_fanout": (lambda x: np.array([x, x * 1.0, x + 2.5]) * 2, 3.0),
    "2d_array_fanout": (lambda x: np.array([[x, x * 1.0, x + 2.5], [x ** 2, x, x / 2.0]]) * 2,
                        3.0),
    "array_from_scalar": (lambda x: np.array(x), 3.0),
    "array_from_arrays": (lambda x: np.array([x, x]), R(3, 2)),
    "array_from_arrays_2": (lambda x: np.array([[2 * x, x + 1], [x, x]]), R(3, 2)),
    "squeeze_func": (lambda x: np.squeeze(x), R(5, 1, 4)),
    "squeeze_method": (lambda x: x.squeeze(), R(5, 1, 4)),
    "repeat": (lambda x: np.repeat(x, 2, axis=1), R(5, 3, 4)),
    "repeat_axis1_rep1": (lambda x: np.repeat(x, 1, axis=1), R(5, 3, 4)),
    "repeat_axis0": (lambda x: np.repeat(x, 2, axis=0), R(5, 3)),
    "repeat_1d_axis0": (lambda x: np.repeat(x, 2, axis=0), R(5)),
    "repeat_axis0_rep1": (lambda x: np.repeat(x, 1, axis=0), R(5, 1)),
    "expand_dims": (lambda x: np.expand_dims(x, 2), R(5, 1, 4)),
    "multi_index": (lambda x: np.sum(x[[0, 0]]), R(3)),
    "multi_index2": (lambda x: np.sum(x[[0, 1, 0]]), R(3)),
    "index_dot_slices": (lambda x: np.dot(x[:2], x[2:]), R(4)),
    "diagonal": (lambda x: np.diagonal(x, axis1=-1, axis2=-2), R(4, 4)),
    "diagonal_3d": (lambda x: np.diagonal(x, axis1=-1, axis2=-2), R(3, 4, 4)),
    "nan_to_num": (lambda x: np.sum(np.sin(np.nan_to_num(x + np.array([0.0, np.nan, np.inf,
                                                                         -np.inf])))), R(4)),
    "max_equal_values": (lambda x: np.max(np.array([x, x])), 1.0),
    "max_equal_values_2d": (lambda x: np.max(np.array([[x, x], [x, 0.5]]), axis=1), 1.0),
    "max_equal_values_2d_negative": (lambda x: np.max(np.array([[x, x], [x, 0.5]]), axis=1),
                                     -1.0),
    "min_3_way_equality": (lambda x: np.min(np.array([[x, x, x], [x, 0.5, 0.5], [0.5, 0.5, 0.5],
                                                      [x, x, 0.5]]), axis=0), 1.0),
    "min_3_way_equality_negative": (lambda x: np.min(np.array([[x, x, x], [x, 0.5, 0.5],
                                                               [0.5, 0.5, 0.5], [x, x, 0.5]]),
                                                     axis=0), -1.0),
    "maximum_equal_values": (lambda x: np.maximum(x, x), 1.0),
    "gradient_1d": (np.gradient, R(10)),
    "gradient_2d": (np.gradient, R(10, 10)),
    "gradient_3d": (np.gradient, R(10, 10, 10)),
}


@pytest.mark.parametrize("name", list(NUMPY_UNARY))
def test_numpy_unary(name):
    fun, x = NUMPY_UNARY[name]
    _check(fun, x)


def _maximum_equal_values_2d(x):
    return np.maximum(np.array([x, x, 0.5]), np.array([[x, 0.5, x], [x, x, 0.5]]))


@pytest.mark.parametrize("x", [1.0, -1.0, 2.0])
def test_numpy_maximum_equal_values_2d(x):
    _check(_maximum_equal_values_2d, x)


def test_numpy_plain_reductions():
    base = np.abs(R(5)) + 0.5
    exact = np.exp(0.7) * base
    for reduction, slope in ((np.sum, np.sum(exact)), (np.prod, 5 * np.prod(exact)),
                             (np.max, np.max(exact)), (np.min, np.min(exact))):
        def fun(a, reduction=reduction):
            return reduction(np.exp(a) * base)
        _check(fun, 0.7)
        np.testing.assert_allclose(grad(fun)(0.7), slope)


def test_numpy_non_numpy_sum():
    _check(lambda x, y: sum([x, y]), R(10, 11), R(10, 11))


def test_numpy_list_of_values():
    assert grad(lambda x: np.mean([x, x + 2]))(0.0) == 1.0
    assert grad(lambda x: np.mean((x, x + 2)))(0.0) == 1.0
    assert grad(lambda x: np.std([x, x + 2]))(0.0) == 0.0
    assert grad(lambda x: np.std((x, x + 2)))(0.0) == 0.0
    assert grad(lambda x: np.var([x, x + 2]))(0.0) == 0.0
    assert grad(lambda x: np.var((x, x + 2)))(0.0) == 0.0


def test_numpy_scalar_attributes():
    def fun(x):
        assert np.shape(x) == () and np.ndim(x) == 0 and np.size(x) == 1
        return x ** 2

    assert grad(fun)(3.0) == 6.0


def test_numpy_len():
    def fun(x):
        assert len(x) == 3
        return x

    _check(fun, R(3, 2))


def test_numpy_append():
    _check(np.append, [1.0, 2.0, 3.0], 4.0)
    _check(np.append, np.array([1.0, 2.0, 3.0]), 4.0)
    _check(lambda a, b: np.append(a, b, axis=0), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
           [[7.0, 8.0, 9.0]])


def test_numpy_concatenate():
    a, b = R(5, 6, 4), R(4, 6, 4)
    c = R(5, 6, 4)
    _check(lambda x: np.concatenate((a, x)), b)
    _check(lambda x: np.concatenate((c, x, c)), a)
    _check(lambda x: np.concatenate((c, x, c), axis=1), a)
    _check(lambda x: np.concatenate((c, x, c), 1), a)


_C32, _C10 = R(3, 2), R(10)
NUMPY_R_C = {
    "r_double": lambda x: np.r_[x, x],
    "no_relation": lambda x: _C32,
    "r_no_relation": lambda x: np.r_[_C32],
    "r_node_and_const": lambda x: np.r_[x, _C32],
    "r_mixed": lambda x: np.r_[x, _C32, x],
    "c_": lambda x: np.c_[x, _C32, x],
}


@pytest.mark.parametrize("name", list(NUMPY_R_C))
def test_numpy_r_and_c(name):
    _check(NUMPY_R_C[name], R(3, 2))


def test_numpy_r_slicing():
    _check(lambda x: np.r_[x, _C10, 1:10], R(10))


def test_numpy_r_basic():
    _check(lambda x: np.r_[x], R(3, 2))


NUMPY_VAR_STD = [
    *_combos("var_ddof", np.var, (0,), [R(3), R(3, 4), R(1, 3)], axis=[None],
             keepdims=[True, False], ddof=[0, 1]),
    *_combos("var_ddof2", np.var, (0,), [R(3, 4), R(1, 3)], axis=[None, 1],
             keepdims=[True, False], ddof=[2]),
    *_combos("std_ddof", np.std, (0,), [R(3), R(3, 4), R(1, 3)], axis=[None],
             keepdims=[True, False], ddof=[0, 1]),
    *_combos("std_ddof2", np.std, (0,), [R(3, 4), R(1, 3)], axis=[None, 1],
             keepdims=[True, False], ddof=[2]),
]


@pytest.mark.parametrize("fun, args, kwargs, argnums, order, modes", NUMPY_VAR_STD)
def test_numpy_var_std_ddof(fun, args, kwargs, argnums, order, modes):
    _check_wrt(fun, args, kwargs, argnums, order, modes)


def test_numpy_where():
    cond = R(4, 5) > 0
    _check(lambda x, y: np.where(cond, x, y), R(4, 5), R(4, 5))


def test_numpy_tensordot_kwargs_by_position():
    def fun(x):
        return np.tensordot(x * np.ones((2, 2)), x * np.ones((2, 2)), 2)

    assert grad(fun)(1.0) == 8.0


def test_numpy_cast_to_int():
    inds = np.ones(5)[:, None]

    def fun(w):
        np.concatenate((w, inds), axis=1)
        new_w = w[:, :-1]
        new_inds = np.int64(w[:, -1])
        assert new_inds.dtype == np.int64
        return new_w[new_inds].sum()

    w = R(5, 10)
    w[:, -1] = RNG.integers(0, 5, 5) + 0.5  # indices away from where int64() jumps
    _check(fun, w)


@pytest.mark.parametrize("num", [0, 1, 5])
def test_numpy_linspace(num):
    def fun(x, y):
        return np.linspace(x, y, num)

    _check(fun, 1.2, 3.4)
    _check(fun, 1.2, -3.4)
    _check(fun, 1.2, 1.2)


def test_numpy_astype():
    x = np.arange(3, dtype="float32")

    def f(x):
        return np.sum(np.sin(x.astype("float64")))

    assert grad(f)(x).dtype == np.dtype("float32")


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1), (0, -1)])
def test_numpy_gradient_axis(axis):
    _check(lambda x: np.gradient(x, axis=axis), R(10, 10, 10))


# -- test_linalg.py -------------------------------------------------------------------------------

def _T(a):
    return np.swapaxes(a, -1, -2)


def _symmetrize(a):
    lower = np.tril(a)
    return (lower + _T(lower)) / 2.0


def _check_symmetric(fun, a, **kwargs):
    """autograd's ``check_symmetric_matrix_grads``: ``fun`` of the symmetrized argument."""
    _check(lambda x: fun(_symmetrize(x)), a, **kwargs)


def _rand_psd(d):
    mat = R(d, d)
    return mat @ mat.T


def _eigh_lower(x):
    w, v = np.linalg.eigh(x)
    return w, v


def _eigh_upper(x):
    w, v = np.linalg.eigh(x, "U")
    return w, v


def _eigh_lower_abs(x):
    w, v = np.linalg.eigh(x)
    return w, np.abs(v)


def _eigh_upper_abs(x):
    w, v = np.linalg.eigh(x, "U")
    return w, np.abs(v)


def _eig_real(x):
    w, v = np.linalg.eig(x)
    return np.abs(w), np.abs(v)


def _eig_complex(x):
    w, v = np.linalg.eig(x)
    return w, np.abs(v)


def _svd(x):
    u, s, v = np.linalg.svd(x, full_matrices=False)
    return u, s, v


def _svd_abs(x):
    u, s, v = np.linalg.svd(x, full_matrices=False)
    return np.abs(u), s, np.abs(v)


def _svd_s(x):
    return np.linalg.svd(x, full_matrices=False, compute_uv=False)


def _slogdet(x):
    sign, logdet = np.linalg.slogdet(x)
    return logdet


def _batch_hermitian(mat):
    return np.einsum("...ij,...kj->...ik", mat, mat)


_B8 = R(8, 8)
_B6 = R(6, 6)
_SQ4 = R(4, 4, 4) + 5 * np.eye(4)
_D6 = R(6, 6)
LINALG = {
    "inv": (np.linalg.inv, _B8 @ _B8 + np.eye(8)),
    "inv_3d": (np.linalg.inv, _SQ4),
    "inv_4d": (np.linalg.inv, R(4, 4, 4, 4) + 5 * np.eye(4)),
    "det": (np.linalg.det, R(6, 6)),
    "det_3d": (np.linalg.det, R(3, 3, 3)),
    "slogdet": (_slogdet, _D6),
    "slogdet_negative": (_slogdet, -_D6),
    "slogdet_3d": (lambda x: np.sum(np.linalg.slogdet(x)[1]),
                   np.stack([_rand_psd(5) + 5 * np.eye(5) for _ in range(3)])),
    "vector_2norm": (np.linalg.norm, R(6)),
    "vector_2norm_complex": (np.linalg.norm, C(6)),
    "frobenius_norm": (np.linalg.norm, R(6, 5)),
    "frobenius_norm_complex": (np.linalg.norm, C(6, 5)),
    "frobenius_norm_axis": (lambda x: np.linalg.norm(x, axis=(0, 1)), R(6, 5, 4)),
    "frobenius_norm_axis_complex": (lambda x: np.linalg.norm(x, axis=(0, 1)), C(6, 5, 4)),
    **{f"vector_norm_ord{o}": (lambda x, o=o: np.linalg.norm(x, ord=o), R(6)) for o in (2, 3, 4)},
    **{f"vector_norm_ord{o}_complex": (lambda x, o=o: np.linalg.norm(x, ord=o), C(6))
       for o in (2, 3, 4)},
    **{f"norm_axis{a}": (lambda x, a=a: np.linalg.norm(x, axis=a), R(6, 5, 4)) for a in range(3)},
    **{f"norm_axis{a}_complex": (lambda x, a=a: np.linalg.norm(x, axis=a), C(6, 5, 4))
       for a in range(3)},
    "norm_nuclear": (lambda x: np.linalg.norm(x, ord="nuc"), R(6, 5)),
    "norm_nuclear_complex": (lambda x: np.linalg.norm(x, ord="nuc"), C(6, 5)),
    "norm_nuclear_axis": (lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)), R(6, 5, 4)),
    "norm_nuclear_axis_complex": (lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)),
                                  C(6, 5, 4)),
    "eigh_lower": (_eigh_lower, R(6, 6)),
    "eigh_upper": (_eigh_upper, R(6, 6)),
    "eigh_lower_broadcasting": (_eigh_lower, _batch_hermitian(R(2, 3, 6, 6) + 10 * np.eye(6))),
    "eigh_upper_broadcasting": (_eigh_upper, _batch_hermitian(R(2, 3, 6, 6) + 10 * np.eye(6))),
    "eigh_lower_complex": (_eigh_lower_abs, C(6, 6)),
    "eigh_upper_complex": (_eigh_upper_abs, C(6, 6)),
    "eig_real": (_eig_real, R(8, 8)),
    "eig_complex": (_eig_complex, C(8, 8)),
    "eig_batched": (_eig_complex, C(5, 8, 8)),
    **{f"svd_{shape_name}": (_svd, R(*shape)) for shape_name, shape in (
        ("wide_2d", (3, 5)), ("wide_3d", (4, 3, 5)), ("square_2d", (4, 4)),
        ("square_3d", (3, 4, 4)), ("tall_2d", (5, 3)), ("tall_3d", (4, 5, 3)))},
    **{f"svd_{shape_name}_complex": (_svd_abs, C(*shape)) for shape_name, shape in (
        ("wide_2d", (3, 5)), ("wide_3d", (4, 3, 5)), ("square_2d", (4, 4)),
        ("square_3d", (3, 4, 4)), ("tall_2d", (5, 3)), ("tall_3d", (4, 5, 3)))},
    "svd_only_s_2d": (_svd_s, R(5, 3)),
    "svd_only_s_2d_complex": (_svd_s, C(5, 3)),
    "svd_only_s_3d": (_svd_s, R(4, 5, 3)),
    "svd_only_s_3d_complex": (_svd_s, C(4, 5, 3)),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg(name):
    fun, x = LINALG[name]
    _check(fun, x)


@pytest.mark.parametrize("shape", [(5, 2), (5, 3), (5, 4), (5, 5), (5, 6), (5, 7),
                                   (2, 5, 2), (2, 5, 4), (2, 5, 7)])
def test_linalg_pinv(shape):
    _check(np.linalg.pinv, R(*shape))
    _check(lambda x: np.linalg.pinv(_T(x) @ x), R(*shape))


def test_linalg_solve():
    a8 = R(8, 8) + 10.0 * np.eye(8)
    b87, b8 = R(8, 7), R(8)
    a6, b65 = R(6, 6) + np.eye(6), R(6, 5)
    _check(lambda a: np.linalg.solve(a, b87), a8)
    _check(lambda a: np.linalg.solve(a, b8), a8)
    _check(lambda b: np.linalg.solve(a6, b), b65)
    a3d, b3d, b3d3 = R(5, 4, 4) + 5 * np.eye(4), R(5, 4), R(5, 4, 6)
    _check(lambda a: np.linalg.solve(a, b3d[..., None])[..., 0], a3d)
    _check(lambda a: np.linalg.solve(a, b3d3), a3d)


def test_linalg_cholesky():
    _check_symmetric(np.linalg.cholesky, _rand_psd(6))
    _check_symmetric(np.linalg.cholesky, np.stack([_rand_psd(6) for _ in range(3)]))


def test_linalg_cholesky_reparameterization_trick():
    noise = np.random.RandomState(0).randn(6)

    def fun(a):
        return np.linalg.norm(np.dot(np.linalg.cholesky(a), noise))

    _check_symmetric(fun, _rand_psd(6))


def test_linalg_norm_list_of_values():
    assert grad(lambda x: np.linalg.norm([x, x + 2]))(0.0) == 1.0
    assert grad(lambda x: np.linalg.norm((x, x + 2)))(0.0) == 1.0


# -- test_scalar_ops.py ----------------------------------------------------------------------------

def _times3(fn):
    return lambda x: 3.0 * fn(x)


SCALAR_OPS = [
    *[pytest.param(_times3(f), x, id=f"{f.__name__}-{x}") for f in (np.abs, np.absolute)
      for x in (1.1, -1.1)],
    *[pytest.param(_times3(f), x, id=f"{f.__name__}-{x}") for f, x in (
        (np.sin, R()), (np.sign, 1.1), (np.sign, -1.1), (np.exp, R()), (np.log, abs(R())),
        (np.log2, abs(R())), (np.log10, abs(R())), (np.log1p, abs(R())), (np.expm1, abs(R())),
        (np.exp2, abs(R())), (np.negative, R()), (np.cos, R()), (np.tan, R()), (np.cosh, R()),
        (np.sinh, R()), (np.tanh, R()), (np.arccos, 0.1), (np.arcsin, 0.1), (np.arctan, 0.2),
        (np.arccosh, R() ** 2 + 1.2), (np.arcsinh, R()), (np.arctanh, 0.2),
        (np.sqrt, 10.0 * rand()), (np.rad2deg, 10.0 * rand()), (np.deg2rad, 10.0 * rand()),
        (np.radians, 10.0 * rand()), (np.degrees, 10.0 * rand()), (np.sinc, 10.0 * rand()))],
    pytest.param(np.reciprocal, rand(), id="reciprocal"),
    pytest.param(np.negative, rand(), id="negative"),
    pytest.param(lambda x: 3.0 * -x, R(), id="neg"),
    pytest.param(lambda x, y=1.0 + R() ** 2: np.power(x, y), rand() ** 2 + 1.0,
                 id="power_arg0"),
    pytest.param(lambda y, x=R() ** 2: np.power(x, y), rand() ** 2, id="power_arg1"),
    pytest.param(lambda y: np.power(0.0, y), rand() ** 2, id="power_arg1_zero"),
]


@pytest.mark.parametrize("fun, x", SCALAR_OPS)
def test_scalar_ops(fun, x):
    _check(fun, x)


@pytest.mark.parametrize("fun", [np.abs, np.absolute])
def test_scalar_ops_abs_at_zero(fun):
    _check(lambda x: 3.0 * fun(x), 0.0, order=1)


def test_scalar_ops_power_zero_exponent():
    fun = lambda x: np.power(x, 0.0)  # noqa: E731  (autograd's issue #116)
    assert grad(fun)(0.0) == 0.0
    assert grad(grad(fun))(0.0) == 0.0


@pytest.mark.parametrize("fun", [np.mod, np.divide, np.multiply, np.true_divide])
def test_scalar_ops_binary(fun):
    _check(fun, rand(), rand())


# -- test_binary_ops.py and test_truediv.py ------------------------------------------------------

def _gap_from_zero(x):
    return np.sqrt(x ** 2 + 0.5)


def _binary_args():
    """The scalar, vector and matrices of autograd's ``arg_pairs``, drawn again until ``x % y``
    of two different ones (made safe from zero) has no jump within finite-difference reach."""
    while True:
        args = (2.0, R(4), R(3, 4), R(1, 4))
        safe = [_gap_from_zero(a) for a in args]
        ratios = [x / y for i, x in enumerate(safe) for j, y in enumerate(safe) if i != j]
        if all(np.min(np.abs(r - np.round(r))) > 0.01 for r in ratios):
            return args


_BINARY_ARGS = _binary_args()
ARG_PAIRS = [pytest.param(a, b, id=f"{i}-{j}") for i, a in enumerate(_BINARY_ARGS)
             for j, b in enumerate(_BINARY_ARGS)]


@pytest.mark.parametrize("a, b", ARG_PAIRS)
def test_binary_ops(a, b):
    _check(lambda x, y: x * y, a, b)
    _check(lambda x, y: x + y, a, b)
    _check(lambda x, y: x - y, a, b)
    _check(lambda x, y: x / y, _gap_from_zero(a), _gap_from_zero(b))
    if a is not b:  # mod's gradient is undefined at x == y
        _check(lambda x, y: x % y, _gap_from_zero(a), _gap_from_zero(b))
    _check(lambda x, y: x ** y, np.abs(a) + 1.1, b)
    _check(np.arctan2, a, b)
    _check(np.hypot, a, b)


_COMPARISONS = [lambda x, y: np.sum(x < x) + 0.0, lambda x, y: np.sum(x <= y) + 0.0,
                lambda x, y: np.sum(x > y) + 0.0, lambda x, y: np.sum(x >= y) + 0.0,
                lambda x, y: np.sum(x == y) + 0.0, lambda x, y: np.sum(x != y) + 0.0]


@pytest.mark.parametrize("a, b", ARG_PAIRS)
def test_binary_ops_comparisons(a, b):
    zeros = (a + b) * 0
    for fun in _COMPARISONS:
        assert np.all(grad(fun)(a, b) == zeros)
        assert np.all(grad(fun, 1)(a, b) == zeros)
        value, _ = value_and_grad(fun)(a, b)
        assert value == fun(a, b)


# -- test_fft.py ---------------------------------------------------------------------------------

def _hermitian_input(fft_fun, mat):
    """autograd's ``match_complex``: an inverse real FFT is fed a forward real FFT."""
    name = fft_fun.__name__
    return getattr(np.fft, name[1:])(mat) if name.startswith("ir") else mat


FFT = {
    "fft": (np.fft.fft, R(5, 5)),
    "fft_ortho": (lambda x: np.fft.fft(x, norm="ortho"), R(5, 5)),
    "fft_axis": (lambda x: np.fft.fft(x, axis=0), R(5, 5)),
    "ifft": (np.fft.ifft, R(5, 5)),
    "fft2": (np.fft.fft2, R(5, 5) / 10.0),
    "ifft2": (np.fft.ifft2, R(5, 5)),
    "fftn": (np.fft.fftn, R(5, 5) / 10.0),
    "ifftn": (np.fft.ifftn, R(5, 5)),
    "rfft": (np.fft.rfft, R(4, 4) / 10.0),
    "rfft_ortho": (lambda x: np.fft.rfft(x, norm="ortho"), R(4, 4) / 10.0),
    "rfft_axes": (lambda x: np.fft.rfft(x, axis=0), R(4, 4) / 10.0),
    "irfft": (np.fft.irfft, np.fft.rfft(R(4, 4) / 10.0)),
    "irfft_ortho": (lambda x: np.fft.irfft(x, norm="ortho"), np.fft.rfft(R(4, 4) / 10.0)),
    "rfft2": (np.fft.rfft2, R(4, 4) / 10.0),
    "irfft2": (np.fft.irfft2, np.fft.rfft2(R(4, 4) / 10.0)),
    "rfftn": (np.fft.rfftn, R(4, 4, 4) / 10.0),
    "rfftn_odd": (np.fft.rfftn, R(5, 5, 5) / 10.0),
    "rfftn_subset": (lambda x: np.fft.rfftn(x)[(0, 1, 0), (3, 3, 2)], R(4, 4, 4) / 10.0),
    "rfftn_axes": (lambda x: np.fft.rfftn(x, axes=(0, 2)), R(4, 4, 4) / 10.0),
    "irfftn": (np.fft.irfftn, np.fft.rfftn(R(4, 4, 4) / 10.0)),
    "irfftn_subset": (lambda x: np.fft.irfftn(x)[(0, 1, 0), (3, 3, 2)],
                      np.fft.rfftn(R(4, 4, 4) / 10.0)),
    "fftshift": (np.fft.fftshift, R(5, 5) / 10.0),
    "fftshift_even": (np.fft.fftshift, R(4, 4) / 10.0),
    "fftshift_axes": (lambda x: np.fft.fftshift(x, axes=1), R(5, 5) / 10.0),
    "ifftshift": (np.fft.ifftshift, R(5, 5)),
    "ifftshift_even": (np.fft.ifftshift, R(4, 4)),
    "ifftshift_axes": (lambda x: np.fft.ifftshift(x, axes=1), R(5, 5)),
    **{f"{f.__name__}_n{n:+d}": (lambda x, f=f, d=d, n=n: f(x, d + n),
                                 _hermitian_input(f, R(d, d)))
       for f, d in ((np.fft.fft, 5), (np.fft.ifft, 5), (np.fft.rfft, 4), (np.fft.irfft, 4))
       for n in (-2, 2)},
    **{f"{f.__name__}_s": (lambda x, f=f, d=d: f(x, s=[d + 2, d - 2], axes=[0, 2]),
                           _hermitian_input(f, R(d, d, d) / 10.0))
       for f, d in ((np.fft.fft2, 5), (np.fft.ifft2, 5), (np.fft.fftn, 5), (np.fft.ifftn, 5),
                    (np.fft.rfft2, 4), (np.fft.irfft2, 4), (np.fft.rfftn, 4), (np.fft.irfftn, 4))},
}


@pytest.mark.parametrize("name", list(FFT))
def test_fft(name):
    fun, x = FFT[name]
    _check(fun, x)


# -- test_complex.py -----------------------------------------------------------------------------

def test_complex_real_type():
    df = grad(lambda x: np.sum(np.real(x)))
    assert np.isrealobj(df(2.0))
    assert np.iscomplexobj(df(1.0j))


def test_complex_real_if_close_type():
    df = grad(lambda x: np.sum(np.real_if_close(x)))
    assert np.isrealobj(df(1.0))


@pytest.mark.parametrize("fun", [np.angle, np.abs], ids=["angle", "abs"])
@pytest.mark.parametrize("x, x2", [(rand(), rand()), (rand() + 1j * rand(), rand() + 1j * rand()),
                                   (1.1, 2.1), (1.1 + 1.2j, 1.1 + 1.3j)])
def test_complex_angle_abs(fun, x, x2):
    _check(fun, x)
    _check(lambda z: grad(fun)(z), x2)


# -- test_graphs.py ------------------------------------------------------------------------------

def _sin_fanout(x):
    return np.sin(np.sin(x) + np.sin(x))


def test_graphs_grad_fanout():
    _check(_sin_fanout, R())
    _check(grad(_sin_fanout), rand())


def test_graphs_grad_const():
    assert np.allclose(grad(lambda x: 1.0)(2.0), 0.0)


def test_graphs_grad_identity():
    df = grad(lambda x: x)
    assert np.allclose(df(2.0), 1.0)
    assert np.allclose(grad(df)(2.0), 0.0)


def test_graphs_hess_vector_prod():
    randv = R(10)

    def fun(x):
        return np.sin(np.dot(x, randv))

    df = grad(fun)

    def vector_product(x, v):
        return np.sin(np.dot(v, df(x)))

    _check(fun, R(10))
    _check(vector_product, R(10), R(10))


def test_graphs_enclosing_scope_ref():
    def fun(x):
        inner_fun = lambda y: x * y  # noqa: E731
        return x * grad(inner_fun)(2.0)

    def fun_2(x):
        inner_fun = lambda y: y * x  # noqa: E731
        return x * grad(inner_fun)(2.0)

    _check(fun, 1.0)
    _check(fun_2, 1.0)


def test_graphs_mutating_outgrad():
    def fun(a):
        b = a + 1.0
        c = b + 1.5
        d = a + b
        return d + c

    def fun_from_indexing(a):
        b = a + 1.0
        c = b[0] + 1.5
        d = a + b
        return d + c

    _check(fun, R(5))
    _check(fun_from_indexing, R(5))


def test_graphs_complex_mutating_outgrad_from_indexing():
    def fun(a):
        b = a + 1.0j
        c = b[0] + 1.5
        d = a + b
        e = d + c
        return np.sum(np.sin(np.real(e)))

    a = R(5)
    _check(fun, a)
    _check(lambda x: grad(fun)(x), a)


def test_graphs_complex_separate_real_and_imaginary():
    def fun(a):
        r, i = np.real(a), np.imag(a)
        a = np.abs(r) ** 1.4 + np.abs(i) ** 1.3
        return np.sum(np.sin(a))

    # |x| ** 1.3 has an unbounded third derivative at 0: the parts are kept away from 0
    away = lambda x: np.sign(x) * (0.3 + np.abs(x))  # noqa: E731
    a = away(R(5, 3)) + 0.1j * away(R(5, 3))
    _check(fun, a)
    _check(lambda x: grad(fun)(x), a)


def _two_sins(x, y):
    return np.sin(np.sin(x) + np.sin(y))


def test_graphs_third_derivative():
    _check(_sin_fanout, R())
    _check(grad(_sin_fanout), rand())
    _check(grad(grad(_sin_fanout)), rand())
    _check(grad(grad(grad(_sin_fanout))), rand(), order=1)


@pytest.mark.parametrize("argnums", [(0, 1, 0), (1, 0, 1)])
def test_graphs_third_derivative_other_args(argnums):
    first = grad(_two_sins, argnums[0])
    second = grad(first, argnums[1])
    third = grad(second, argnums[2])
    for f in (_two_sins, first, second):
        _check(f, R(), R())
    _check(third, R(), R(), order=1)


@pytest.mark.parametrize("shape, kwargs", [((3, 3), {"keepdims": True}),
                                           ((3, 1), {"axis": 0, "keepdims": False}),
                                           ((1, 3), {"axis": 1, "keepdims": False}),
                                           ((3, 1), {"axis": 0, "keepdims": True}),
                                           ((1, 3), {"axis": 1, "keepdims": True})])
def test_graphs_singleton_array_output(shape, kwargs):
    def fun(x):
        return np.sum(np.sin(x), **kwargs)

    _check(fun, R(*shape))
    _check(lambda x: np.sum(grad(lambda y: np.sum(fun(y)))(x)), R(*shape))


def test_graphs_assignment_is_differentiated():
    # autograd raises TypeError on ``A[1] = b``; overdub differentiates in-place writes
    def fun(a, b):
        a[1] = b
        return a

    _check(lambda a, b: fun(a.copy(), b), R(5), 3.0)


# -- test_wrappers.py ------------------------------------------------------------------------------

def test_wrappers_return_both():
    fun = lambda x: 3.0 * x ** 3.2  # noqa: E731
    f, d = value_and_grad(fun)(1.7)
    assert f == fun(1.7)
    assert d == grad(fun)(1.7)


def test_wrappers_value_and_grad():
    fun = lambda x: np.sum(np.sin(x) ** 2)  # noqa: E731
    x = R(5)
    value, gradient = value_and_grad(fun)(x)
    assert type(value) is not Tagged
    np.testing.assert_allclose(value, fun(x))
    np.testing.assert_allclose(gradient, grad(fun)(x))
    _check(lambda x: value_and_grad(fun)(x)[0], x)


def test_wrappers_hessian():
    h = R(5, 5)
    hess = hessian(lambda x: np.dot(np.dot(x, h), x))(R(5))
    np.testing.assert_allclose(hess, h + h.T)


def _complicated_fun(a, b, c, d, e, f=1.1, g=9.0):
    return a + np.sin(b) + np.cosh(c) + np.cos(d) + np.tan(e) + f + g


def test_wrappers_multigrad():
    a, b, c, d, e, f, g = 0.5, -0.3, 0.2, -1.1, 0.7, 0.6, -0.1
    wrapped = grad(_complicated_fun, argnums=(3, 1))(a, b, c, d, e, f=f, g=g)
    explicit = grad(lambda db: _complicated_fun(a, db[1], c, db[0], e, f=f, g=g))((d, b))
    np.testing.assert_allclose(wrapped, explicit)
    value, both = value_and_grad(_complicated_fun, argnums=(3, 1))(a, b, c, d, e, f=f, g=g)
    np.testing.assert_allclose(value, _complicated_fun(a, b, c, d, e, f=f, g=g))
    np.testing.assert_allclose(both, wrapped)


def test_wrappers_multigrad_onearg():
    fun = lambda x, y: np.sum(x + np.sin(y))  # noqa: E731
    packed = lambda xy: np.sum(xy[0] + np.sin(xy[1]))  # noqa: E731
    a, b = R(3), R(3)
    np.testing.assert_allclose(grad(fun, argnums=(0,))(a, b)[0], grad(packed)((a, b))[0])


def _elementwise_grad(fun, argnum=0):
    """autograd's ``elementwise_grad``: the vector-Jacobian product with ones."""
    def gradient(*args):
        out, pullback = vjp(fun, *args)
        return pullback(np.ones_like(out))[argnum]
    return gradient


def test_wrappers_elementwise_grad():
    def simple_fun(a):
        return a + np.sin(a) + np.cosh(a)

    def simple_fun2(a, b):
        return a + np.sin(a) + np.cosh(b)

    a, b = R(10), R(10)
    np.testing.assert_allclose(_elementwise_grad(simple_fun)(a),
                               [grad(simple_fun)(a[i]) for i in range(10)])
    np.testing.assert_allclose(_elementwise_grad(simple_fun2, 1)(0.9, b),
                               [grad(simple_fun2, 1)(0.9, b[i]) for i in range(10)])


@pytest.mark.parametrize("shape", [(5,), (5, 4), (5, 4, 3)])
def test_wrappers_hessian_tensor_product(shape):
    fun = lambda a: np.sum(np.sin(a))  # noqa: E731
    a, v = R(*shape), R(*shape)
    h = hessian(fun)(a)
    np.testing.assert_allclose(hvp(fun, a, v), np.tensordot(h, v, axes=np.ndim(v)))


def test_wrappers_hvp_of_an_array_built_from_elements():
    # make_hvp's check on a function that builds an array from its argument's elements
    fun = lambda a: np.sum(np.sin(np.array([a[0], a[1] * a[0]])) * a[0])  # noqa: E731
    a, v = R(2), R(2)
    np.testing.assert_allclose(hvp(fun, a, v), hessian(fun)(a) @ v)


@pytest.mark.parametrize("shape, vshape", [((5,), (5,)), ((5, 4), (5, 4)), ((5, 4, 3), (5, 4, 3))])
def test_wrappers_tensor_jacobian_product(shape, vshape):
    fun = lambda a: np.roll(np.sin(a), 1)  # noqa: E731
    a, v = R(*shape), R(*vshape)
    j = jacobian(fun)(a)
    np.testing.assert_allclose(vjp(fun, a)[1](v)[0], np.tensordot(v, j, axes=np.ndim(v)))


def test_wrappers_defvjp_rule_is_used():
    # autograd's deprecated defgrad/defvjp wrappers, as a rule registered with defvjp
    def new_mul(x, y):
        return x * y

    defvjp(new_mul, lambda ct, out, x, y: y * ct, lambda ct, out, x, y: x * ct)
    defjvp(new_mul, lambda dx, out, x, y: dx * y, lambda dy, out, x, y: x * dy)
    try:
        _check(lambda x, y: new_mul(x, y), R(2, 2), R(2, 2))
    finally:
        defvjp(new_mul)
        defjvp(new_mul)


def test_wrappers_partial():
    def f(x, y):
        return x

    assert grad(functools.partial(f, y=1))(2.0) == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.longdouble, np.clongdouble])
def test_wrappers_dtypes(dtype):
    y = R(10, 10).astype(dtype)
    g = grad(lambda x: np.real(np.sum(x ** 2)))(y)
    assert g.dtype == y.dtype


def test_wrappers_make_jvp():
    a, x, v = R(3, 5), R(5), R(5)
    fun = lambda x: np.tanh(np.dot(a, x))  # noqa: E731
    np.testing.assert_allclose(jvp(fun, (x,), (v,))[1], np.dot(jacobian(fun)(x), v))


def _ggnvp(f, g=lambda x: 0.5 * np.dot(x, x)):
    """autograd's ``make_ggnvp``: J^T H_g J v, by jvp, hvp and vjp."""
    def product(x, v):
        y, jv = jvp(f, (x,), (v,))
        return vjp(f, x)[1](hvp(g, y, jv))[0]
    return product


def _explicit_ggnvp(f, g=lambda x: 0.5 * np.dot(x, x)):
    def product(x, v):
        j = jacobian(f)(x)
        return j.T @ hessian(g)(f(x)) @ j @ v
    return product


@pytest.mark.parametrize("nondefault_g", [False, True])
def test_wrappers_make_ggnvp(nondefault_g):
    a, x, v = R(5, 4), R(4), R(4)
    g = (lambda y: np.sum(2.0 * y ** 2 + y ** 4),) if nondefault_g else ()
    for fun in (lambda x: np.dot(a, x), lambda x: np.tanh(np.dot(a, x))):
        np.testing.assert_allclose(_ggnvp(fun, *g)(x, v), _explicit_ggnvp(fun, *g)(x, v))


def test_wrappers_grad_and_aux():
    a, x = R(5, 4), R(4)
    gradient, aux = grad(lambda x: (np.sum(np.dot(a, x)), x ** 2), has_aux=True)(x)
    np.testing.assert_allclose(gradient, grad(lambda x: np.sum(np.dot(a, x)))(x))
    np.testing.assert_allclose(aux, x ** 2)


def test_wrappers_checkpoint():
    def f(a):
        for _ in range(3):
            a = np.sin(a ** 2 + 1)
        return a

    def testfun(f, x):
        for _ in range(2):
            x = f(x)
        return np.sum(x)

    x = R(6)
    np.testing.assert_allclose(grad(lambda x: testfun(checkpoint(f), x))(x),
                               grad(lambda x: testfun(f, x))(x))


# -- test_jacobian.py ------------------------------------------------------------------------------

def test_jacobian_against_grad():
    fun = lambda x: np.sum(np.sin(x), axis=1, keepdims=True)  # noqa: E731
    a = R(1, 3)
    np.testing.assert_allclose(grad(lambda x: np.sum(fun(x)))(a), jacobian(fun)(a)[0, 0])


def test_jacobian_scalar_to_vector():
    val = R()
    np.testing.assert_allclose(jacobian(lambda x: np.array([x, x ** 2, x ** 3]))(val),
                               [1.0, 2 * val, 3 * val ** 2])


def test_jacobian_against_stacked_grads():
    scalar_funs = [lambda x: np.sum(x ** 3), lambda x: np.prod(np.sin(x) + np.sin(x)),
                   lambda x: grad(lambda y: np.exp(y) * np.tanh(x[0]))(x[1])]
    x = R(5)
    jac = jacobian(lambda x: np.array([f(x) for f in scalar_funs]))(x)
    np.testing.assert_allclose(jac, np.vstack([grad(f)(x) for f in scalar_funs]))


def test_jacobian_higher_order():
    fun = lambda x: np.sin(np.outer(x, x)) + np.cos(np.dot(x, x))  # noqa: E731
    assert jacobian(fun)(R(2)).shape == (2, 2, 2)
    assert jacobian(jacobian(fun))(R(2)).shape == (2, 2, 2, 2)
    _check(lambda x: np.sum(np.sin(jacobian(fun)(x))), R(2))
    _check(lambda x: np.sum(np.sin(jacobian(jacobian(fun))(x))), R(2))


# -- test_direct.py --------------------------------------------------------------------------------

def _direct_fun(x):
    return (x + np.sin(x ** 2)) * x


def test_direct_grad_and_derivative():
    assert abs(grad(_direct_fun)(1.3) - 3.190948746871) < 1e-6
    assert abs(derivative(_direct_fun)(1.3) - 3.190948746871) < 1e-6


def test_direct_grad_complex_output():
    with pytest.raises(TypeError):
        grad(lambda x: x * (1.0 + 0.2j))(1.0)


def test_direct_holomorphic_grad():
    g = grad(lambda x: x * (1.0 + 0.2j), holomorphic=True)(1.0 + 0.0j)
    assert 0.9999 < np.real(g) < 1.0001
    assert 0.1999 < np.imag(g) < 0.2001


# -- test_core.py (scalar operators, no NumPy in the function) ---------------------------------

def _nd(f, x, eps=1e-4):
    return (f(x + eps / 2) - f(x - eps / 2)) / eps


@pytest.mark.parametrize("fun", [op.add, op.sub, op.truediv, op.mul, op.pow, op.mod, op.eq, op.ne,
                                 op.le, op.ge, op.lt, op.gt], ids=lambda f: f.__name__)
def test_core_binary(fun):
    x, y = 0.7, 1.8
    for argnum, numeric in ((0, _nd(lambda x: fun(x, y), x)), (1, _nd(lambda y: fun(x, y), y))):
        analytic = grad(lambda x, y: fun(x, y) * 1.0, argnum)(x, y)
        assert abs(analytic - numeric) < 1e-4 + 1e-4 * abs(numeric)


# -- test_dict.py, test_list.py, test_tuple.py ----------------------------------------------------

def _containers(kind):
    items = (R(5, 6), R(4, 3), R(2, 4))
    if kind is dict:
        return {"item_1": items[0], "item_2": items[1], "item_X": items[2]}, "item_1", \
            "item_2", "item_X"
    return kind(items), 0, 1, 2


@pytest.mark.parametrize("kind", [dict, list, tuple])
def test_containers_getter(kind):
    x, k1, k2, k3 = _containers(kind)

    def fun(c):
        return np.sum(c[k1]) + np.sum(c[k2]) + np.sum(c[k2])

    result = grad(fun)(x)
    np.testing.assert_allclose(result[k1], np.ones((5, 6)))
    np.testing.assert_allclose(result[k2], 2 * np.ones((4, 3)))
    np.testing.assert_allclose(result[k3], np.zeros((2, 4)))


@pytest.mark.parametrize("kind", [dict, list, tuple])
def test_containers_grads(kind):
    x, k1, k2, _ = _containers(kind)

    def fun(c):
        return np.sum(np.sin(c[k1])) + np.sum(np.cos(c[k2]))

    def d_fun(c):
        g = grad(fun)(c)
        return np.sum(g[k1]) + np.sum(np.sin(g[k1])) + np.sum(np.sin(g[k2]))

    _check(fun, x)
    _check(d_fun, x)


def test_dict_iter_items_values_keys():
    x = _containers(dict)[0]

    def fun_iter(d):
        a = b = 0.0
        for i, k in enumerate(sorted(d)):
            a = a + np.sum(np.sin(d[k])) * (i + 1.0)
            b = b + np.sum(np.cos(d[k]))
        return a + b

    def fun_items(d):
        a = b = 0.0
        for i, (k, v) in enumerate(sorted(d.items(), key=op.itemgetter(0))):
            a = a + np.sum(np.sin(v)) * (i + 1.0)
            b = b + np.sum(np.cos(v))
        for v in d.values():
            a = a + np.sum(np.sin(v))
        for k in sorted(d.keys()):
            a = a + np.sum(np.cos(d[k]))
        return a + b

    for fun in (fun_iter, fun_items):
        def d_fun(d, fun=fun):
            g = grad(fun)(d)
            return np.sum(g["item_1"]) + np.sum(np.sin(g["item_1"])) + np.sum(np.sin(g["item_2"]))

        _check(fun, x)
        _check(d_fun, x)


@pytest.mark.parametrize("d", [{"item_1": 3.0}, {"item_2": 4.0}, {}])
def test_dict_get(d):
    _check(lambda d, x: d.get("item_1", x) ** 2, d, 2.0)


def test_dict_make_dict():
    _check(lambda x: dict([("a", x)], b=x), 1.0)
    _check(lambda x: dict({"a": x}), 1.0)


def test_list_slices():
    assert grad(lambda x: x[slice(None, -1, None)][0])([1.0, 2.0, 3.0]) == [1.0, 0.0, 0.0]
    assert grad(lambda x: x[1:3][0])([1.0, 2.0, 3.0]) == [0.0, 1.0, 0.0]


def test_list_nested():
    _check(lambda x: x[1:][0], [[1.0], 2.0, 1.5])


def test_list_and_tuple_make():
    _check(lambda x: list((x, x)), 1.0)
    _check(lambda x: tuple([x, x]), 1.0)


def test_tuple_nested_higher_order():
    def outer_fun(x):
        def inner_fun(y):
            return y[0] * y[1]

        return np.sum(np.sin(np.array(grad(inner_fun)((x, x)))))

    _check(outer_fun, 5.0)
    _check(grad(outer_fun), 10.0)
    _check(grad(grad(outer_fun)), 10.0)


# -- test_builtins.py, isinstance checks of test_dict/list/tuple.py ------------------------------

def _checker(ex, type_, truthval):
    if isinstance(ex, type_) != truthval:
        raise AssertionError(f"isinstance({ex!r}, {type_!r}) is not {truthval}")
    return 1.0


@pytest.mark.parametrize("type_, positive, negative", [
    (list, [[]], [()]), (np.ndarray, [np.zeros(1)], [[]]),
    ((tuple, list), [[], ()], [np.zeros(1)])])
def test_builtins_isinstance(type_, positive, negative):
    for ex, truthval in [(e, True) for e in positive] + [(e, False) for e in negative]:
        _checker(ex, type_, truthval)
        grad(_checker)(ex, type_, truthval)


@pytest.mark.parametrize("kind, x", [(dict, {"x": 1.0}), (list, [1.0, 2.0, 3.0]),
                                     (tuple, (1.0, 2.0, 3.0))])
def test_containers_isinstance(kind, x):
    key = "x" if kind is dict else 0

    def fun(c):
        if not isinstance(c, kind):
            raise AssertionError(f"{c!r} is not a {kind.__name__}")
        return c[key]

    assert fun(x) == 1.0
    g = grad(fun)(x)
    assert isinstance(g, kind)
    assert (g[key] if kind is dict else g[0]) == 1.0


# -- test_logic.py ---------------------------------------------------------------------------------

def test_logic_assert():
    def fun(x):
        assert np.allclose(x, (x * 3.0) / 3.0)
        return np.sum(x)

    _check(fun, np.array([1.0, 2.0, 3.0]))


def test_logic_nograd():
    # autograd raises TypeError here; so does overdub (issue 14): a truth value carries no
    # derivative, and grad of it is an error, never a silent zero
    with pytest.raises(TypeError, match="grad requires a real or complex output"):
        grad(lambda x: np.allclose(x, (x * 3.0) / 3.0))(np.array([1.0, 2.0, 3.0]))


def test_logic_no_rule():
    # autograd's primitive without a vjp (or jvp): here a C function without a rule
    with pytest.raises(MissingRuleError):
        grad(lambda x: np.sum(np.fromiter((2.0 * t for t in x), float)))(np.ones(2))
    with pytest.raises(MissingRuleError):
        derivative(lambda x: np.sum(np.fromiter((2.0 * t for t in [x]), float)))(1.0)


@pytest.mark.parametrize("x", [2.0, 2.0 + 1j, 5.0])
def test_logic_falseyness(x):
    _check(lambda x: np.real(x ** 2 if np.iscomplex(x) else np.sum(x)), x)


# -- test_misc.py ----------------------------------------------------------------------------------

def test_misc_flatten_nodes_in_containers():
    def f(x, y):
        return np.sum(np.concatenate([np.ravel(x), np.ravel(y)]))

    assert grad(f, (0, 1))(1.0, 2.0) == (1.0, 1.0)
