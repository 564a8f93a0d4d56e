"""Reverse mode (issue #5): ``vjp``, ``grad``, ``value_and_grad``, ``jacrev``/``jacobian``,
``hessian``, ``hvp``, ``custom_vjp``, ``defvjp`` and ``checkpoint`` on ordinary Python and NumPy.

Written in the style of HIPS autograd's tests (test_numpy.py, test_linalg.py, test_systematic.py,
test_wrappers.py), through our API.  Every function under test is defined in this file: overdub
rewrites functions from their source.  Gradients are checked against central finite differences
(the dot-product test ``<ct, J v> == <J^T ct, v>`` with ``<a, b> = Re(sum(a * b))``, the
autograd/JAX complex convention) and against forward mode (``jacrev == jacfwd``).
"""

from __future__ import annotations

import functools
import gc
import math
import operator
import tracemalloc
import weakref

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import overdub_ad
from overdub import Context, Tagged, overdub
from overdub.contexts import CountContext, TraceContext
from overdub_ad import (MissingRuleError, checkpoint, custom_vjp, defvjp, derivative, explain,
                        grad, hessian, hvp, jacfwd, jacobian, jacrev, jvp, testing,
                        value_and_grad, vjp)
from tests.conftest import fd

try:
    import scipy.special as sc
except ImportError:  # pragma: no cover
    sc = None

# -- helpers -----------------------------------------------------------------------------------

RNG = np.random.default_rng(5)
EPS = 1e-6


def R(*shape):
    return RNG.standard_normal(shape)


def Cx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def U(lo, hi, *shape):
    return RNG.uniform(lo, hi, shape)


def spd(n):
    a = R(n, n)
    return a @ a.T + n * np.eye(n)


def _children(tree):
    """The items of a pytree node these tests pass (a tuple, list, dict or named tuple), or
    None for a leaf."""
    if type(tree) in (tuple, list) or (isinstance(tree, tuple) and hasattr(tree, "_fields")):
        return list(tree)
    if type(tree) is dict:
        return list(tree.values())
    return None


def _leaves(tree):
    children = _children(tree)
    return [tree] if children is None else [leaf for c in children for leaf in _leaves(c)]


def _tree_map(fn, tree, *rest):
    """``tree`` rebuilt with ``fn(leaf, *the leaves of rest at the same place)``."""
    if _children(tree) is None:
        return fn(tree, *rest)
    if type(tree) is dict:
        return {k: _tree_map(fn, tree[k], *[r[k] for r in rest]) for k in tree}
    items = [_tree_map(fn, *parts) for parts in zip(tree, *rest)]
    return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)


def _like(tree, rng):
    """A random pytree shaped like ``tree`` (complex where ``tree`` is complex)."""
    def one(x):
        shape = np.shape(x)
        v = rng.standard_normal(shape)
        if np.iscomplexobj(x):
            v = v + 1j * rng.standard_normal(shape)
        return v if isinstance(x, np.ndarray) else (v.item() if shape == () else v)
    return _tree_map(one, tree)


def _pair(a, b):
    return sum(float(np.real(np.sum(np.asarray(x) * np.asarray(y))))
               for x, y in zip(_leaves(a), _leaves(b)))


def _shift(tree, v, h):
    return _tree_map(lambda x, d: x + h * d, tree, v)


def assert_plain(tree):
    """Outside any context user code never receives a Tagged."""
    for leaf in _leaves(tree):
        assert type(leaf) is not Tagged, f"a Tagged value escaped: {leaf!r}"


def check_grads(fun, *args, argnums=None, rtol=1e-5, atol=1e-6, seed=0):
    """autograd's check_grads, reverse mode: the dot-product test with finite differences."""
    rng = np.random.default_rng(seed)
    argnums = range(len(args)) if argnums is None else argnums
    out, pullback = vjp(fun, *args)
    assert_plain(out)
    ct = _like(out, rng)
    cts = pullback(ct)
    assert_plain(cts)
    assert len(cts) == len(args)
    for i in argnums:
        v = _like(args[i], rng)

        def along(h):
            moved = list(args)
            moved[i] = _shift(args[i], v, h)
            return _pair(ct, fun(*moved))
        numeric = fd(along, 0.0, EPS)
        analytic = _pair(cts[i], v)
        assert abs(numeric - analytic) <= atol + rtol * max(abs(numeric), abs(analytic)), \
            f"argument {i}: finite differences {numeric}, reverse mode {analytic}"


def check_rev_fwd(fun, *args, argnums=0, rtol=1e-9, atol=1e-10):
    """jacrev == jacfwd."""
    rev = jacrev(fun, argnums)(*args)
    fwd = jacfwd(fun, argnums)(*args)
    for r, f in zip(_leaves(rev), _leaves(fwd)):
        np.testing.assert_allclose(r, f, rtol=rtol, atol=atol)


@pytest.fixture
def isolated_rules():
    """Rules registered by a test are forgotten afterwards (the tables are process-wide)."""
    with testing.isolated_rules():
        yield


_SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


def _floats(lo, hi):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def _array(shape, lo=-2.0, hi=2.0):
    return hnp.arrays(np.float64, shape, elements=_floats(lo, hi))


# -- the API -----------------------------------------------------------------------------------

def f_poly(x):
    return 3.0 * x ** 3 - 2.0 * x + 1.0


def test_grad_of_a_float_is_a_float():
    g = grad(f_poly)(2.0)
    assert type(g) is float and g == 9.0 * 4.0 - 2.0


def test_vjp_returns_output_and_pullback():
    x = np.array([0.1, 0.5, 1.0])
    out, pullback = vjp(lambda v: np.sin(v) * 2.0, x)
    np.testing.assert_allclose(out, 2 * np.sin(x))
    (g,) = pullback(np.ones(3))
    np.testing.assert_allclose(g, 2 * np.cos(x))
    (g2,) = pullback(np.arange(3.0))   # the pullback can be called again
    np.testing.assert_allclose(g2, 2 * np.cos(x) * np.arange(3.0))
    assert_plain((out, g, g2))


def test_vjp_several_primals_and_pytree_output():
    def f(x, y):
        return {"s": x * y, "t": (x ** 2, np.sin(y))}
    out, pullback = vjp(f, 2.0, 3.0)
    assert out == {"s": 6.0, "t": (4.0, math.sin(3.0))}
    gx, gy = pullback({"s": 1.0, "t": (1.0, 2.0)})
    assert gx == pytest.approx(3.0 + 4.0) and gy == pytest.approx(2.0 + 2 * math.cos(3.0))


def test_pullback_checks_the_cotangent_structure():
    _, pullback = vjp(lambda x: (x, 2 * x), 1.0)
    with pytest.raises(ValueError, match="structure"):
        pullback(1.0)
    _, pullback = vjp(lambda x: x * 2, np.ones(3))
    with pytest.raises(ValueError, match="shape"):
        pullback(np.ones(2))


def f_two(x, y):
    return x * y ** 2


def test_grad_argnums():
    assert grad(f_two)(2.0, 3.0) == 9.0
    assert grad(f_two, argnums=1)(2.0, 3.0) == 12.0
    assert grad(f_two, argnums=-1)(2.0, 3.0) == 12.0
    assert grad(f_two, argnums=(0, 1))(2.0, 3.0) == (9.0, 12.0)
    assert grad(f_two, argnums=(1,))(2.0, 3.0) == (12.0,)
    with pytest.raises(ValueError, match="argnums"):
        grad(f_two, argnums=2)(2.0, 3.0)


def test_keyword_arguments_pass_through_undifferentiated():
    def f(x, scale=1.0):
        return x * scale
    assert grad(f)(2.0, scale=3.0) == 3.0


def test_pytree_arguments():
    def f(params):
        return params["a"] * params["b"][0] + np.sum(params["b"][1] ** 2)
    g = grad(f)({"a": 2.0, "b": [3.0, np.array([1.0, 2.0])]})
    assert g["a"] == 3.0 and g["b"][0] == 2.0
    np.testing.assert_allclose(g["b"][1], [2.0, 4.0])
    assert isinstance(g["b"], list)
    check_grads(f, {"a": 2.0, "b": [3.0, np.array([1.0, 2.0])]})


def test_has_aux_and_value_and_grad():
    def f(x):
        return x ** 2, {"tripled": x * 3}
    g, aux = grad(f, has_aux=True)(2.0)
    assert g == 4.0 and aux == {"tripled": 6.0}
    (value, aux), g = value_and_grad(f, has_aux=True)(2.0)
    assert value == 4.0 and aux == {"tripled": 6.0} and g == 4.0
    assert value_and_grad(f_poly)(2.0) == (f_poly(2.0), 34.0)
    assert_plain((value, aux, g))
    with pytest.raises(TypeError, match="pair"):
        grad(f_poly, has_aux=True)(2.0)


def test_grad_of_a_non_scalar_output_suggests_jacrev_or_vjp():
    with pytest.raises(TypeError, match="scalar") as info:
        grad(lambda x: x * 2)(np.ones(3))
    assert "jacrev" in str(info.value) and "vjp" in str(info.value)
    with pytest.raises(TypeError, match="jacrev"):
        grad(lambda x: (x, x))(1.0)


def test_bad_inputs_are_clear_errors():
    with pytest.raises(TypeError, match="callable"):
        grad(3)
    with pytest.raises(TypeError, match="callable"):
        vjp("f", 1.0)
    with pytest.raises(TypeError, match="callable"):
        jacrev(None)
    with pytest.raises(TypeError, match="str"):
        grad(lambda s: 1.0)("abc")
    with pytest.raises(TypeError, match="bool"):
        grad(lambda b: 1.0)(True)
    with pytest.raises(TypeError, match="holomorphic"):
        grad(lambda x: x * 1j)(1.0)


def test_constant_function_has_zero_gradient():
    assert grad(lambda x: 3.0)(2.0) == 0.0
    np.testing.assert_array_equal(grad(lambda x: 3.0)(np.ones(3)), np.zeros(3))
    assert grad(lambda x, y: y, argnums=0)(1.0, 2.0) == 0.0


def test_integer_argument_gets_a_float_gradient():
    assert grad(lambda x: x * x)(3) == 6.0
    g = grad(lambda x: np.sum(x ** 2))(np.arange(3))     # differentiated at an integer point
    assert g.dtype == np.float64 and g.tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(TypeError, match="bool"):
        grad(lambda x: np.sum(x))(np.ones(2, dtype=bool))


def test_jacrev_shapes_and_alias():
    assert jacobian is jacrev
    x = R(3)
    J = jacrev(lambda v: np.outer(v, v))(x)
    assert J.shape == (3, 3, 3)
    np.testing.assert_allclose(J, jacfwd(lambda v: np.outer(v, v))(x))
    np.testing.assert_allclose(jacrev(lambda v: np.sum(v ** 2))(x), 2 * x)
    Jx, Jy = jacrev(lambda a, b: a * b, argnums=(0, 1))(x, np.arange(3.0))
    np.testing.assert_allclose(Jx, np.diag(np.arange(3.0)))
    np.testing.assert_allclose(Jy, np.diag(x))
    J = jacrev(lambda v: {"a": 2 * v, "b": v[0] * v})(np.ones(2))
    np.testing.assert_allclose(J["a"], 2 * np.eye(2))
    np.testing.assert_allclose(J["b"], [[2.0, 0.0], [1.0, 1.0]])
    assert jacrev(lambda t: t ** 3)(2.0) == 12.0


class Model:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return np.sum(np.tanh(x @ self.w))

    def loss(self, x):
        return self(x) ** 2


def test_callables_methods_and_partials():
    import functools
    w, x = R(3, 2), R(4, 3)
    model = Model(w)
    expected = fd(model, x)
    np.testing.assert_allclose(grad(model)(x), expected, rtol=1e-6)
    np.testing.assert_allclose(grad(model.loss)(x), 2 * model(x) * expected, rtol=1e-6)
    scale = functools.partial(lambda a, b: a * b ** 2, 3.0)
    assert grad(scale)(2.0) == 12.0

    def with_params(w):
        return Model(w)(x)          # parameters stored as an attribute inside
    check_grads(with_params, w)


def outputs_by_append(x):
    out = []
    for i in range(3):
        out.append(x * i)
    return out


def test_outputs_built_by_append():
    out, pullback = vjp(outputs_by_append, 2.0)
    assert out == [0.0, 2.0, 4.0] and pullback([1.0, 1.0, 1.0]) == (3.0,)
    np.testing.assert_allclose(jacrev(lambda v: np.stack(outputs_by_append(v)))(np.ones(2)),
                               jacfwd(lambda v: np.stack(outputs_by_append(v)))(np.ones(2)))


def test_fast_and_nested_paths_agree():
    # no enclosing context: float arithmetic is recorded as local partials; under a counting
    # context every primitive runs through it -- the same numbers either way
    x = np.array([0.5, 1.2, -0.3, 0.8])
    np.testing.assert_array_equal(overdub(CountContext(), grad(rosenbrock), x),
                                  grad(rosenbrock)(x))
    assert overdub(CountContext(), grad(newton_sqrt), 2.0) == grad(newton_sqrt)(2.0)


def test_outputs_are_plain_values():
    out = value_and_grad(lambda x: np.sum(np.tanh(x)))(R(4))
    assert_plain(out)
    assert type(out[0]) is not Tagged


# -- the NumPy surface (autograd's test_numpy.py) -------------------------------------------

A = R(3, 4)
B = R(4, 2)
V3 = R(3)
V4 = R(4)
T234 = R(2, 3, 4)
SQ = R(3, 3) + 3 * np.eye(3)
POS = U(0.5, 2.0, 3, 4)


def logsumexp(x, axis=None):
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


NUMPY_CASES = {
    # reductions
    "sum": (lambda x: np.sum(x), A), "sum_axis": (lambda x: np.sum(x, axis=1), A),
    "sum_axes_keepdims": (lambda x: np.sum(x, axis=(0, 2), keepdims=True), T234),
    "mean": (lambda x: np.mean(x, axis=0), A), "mean_all": (lambda x: np.mean(x), T234),
    "prod": (lambda x: np.prod(x, axis=1), A), "prod_all": (lambda x: np.prod(x), A[:2]),
    "max": (lambda x: np.max(x, axis=1), A), "max_all": (lambda x: np.max(x), A),
    "min": (lambda x: np.min(x, axis=0), A),
    "amax_keepdims": (lambda x: np.amax(x, 1, keepdims=True), A),
    "std": (lambda x: np.std(x, axis=0), A), "std_all": (lambda x: np.std(x), A),
    "std_ddof": (lambda x: np.std(x, axis=1, ddof=1), A),
    "var": (lambda x: np.var(x, axis=1), A), "var_all": (lambda x: np.var(x), T234),
    "cumsum": (lambda x: np.cumsum(x, axis=1), A), "cumsum_flat": (lambda x: np.cumsum(x), A),
    "cumprod": (lambda x: np.cumprod(x, axis=0), A), "cumprod_flat": (lambda x: np.cumprod(x), A),
    "logsumexp": (lambda x: logsumexp(x, axis=1), A),
    "logsumexp_all": (lambda x: logsumexp(x), A),
    "softmax": (softmax, A),
    "average": (lambda x: np.average(x, axis=1, weights=np.arange(1.0, 5.0)), A),
    "nansum": (lambda x: np.nansum(x), A), "ptp": (lambda x: np.ptp(x, axis=1), A),
    "trace": (lambda x: np.trace(x), SQ),
    # methods
    "m_sum": (lambda x: x.sum(axis=0), A), "m_mean": (lambda x: x.mean(), A),
    "m_max": (lambda x: x.max(axis=1), A), "m_min": (lambda x: x.min(), A),
    "m_std": (lambda x: x.std(), A), "m_var": (lambda x: x.var(axis=0), A),
    "m_prod": (lambda x: x.prod(axis=0), A), "m_cumsum": (lambda x: x.cumsum(), A),
    "m_reshape": (lambda x: x.reshape(2, 6), A),
    "m_reshape_tuple": (lambda x: x.reshape((6, 2)), A),
    "m_T": (lambda x: x.T @ x, A), "m_dot": (lambda x: x.dot(x.T), A),
    "m_ravel": (lambda x: x.ravel() * 2, A), "m_flatten": (lambda x: x.flatten(), A),
    "m_transpose": (lambda x: x.transpose(), T234),
    "m_transpose_axes": (lambda x: x.transpose(1, 0, 2), T234),
    "m_clip": (lambda x: x.clip(-0.5, 0.5), A), "m_copy": (lambda x: x.copy() * 3, A),
    "m_squeeze": (lambda x: x[None].squeeze(), A), "m_astype": (lambda x: x.astype(np.float64), A),
    "m_swapaxes": (lambda x: x.swapaxes(0, 2), T234), "m_trace": (lambda x: x.trace(), SQ),
    "m_diagonal": (lambda x: x.diagonal(), SQ), "m_repeat": (lambda x: x.repeat(2, axis=0), A),
    "m_take": (lambda x: x.take([0, 2, 2]), A), "m_conj": (lambda x: x.conj(), A),
    "m_item": (lambda x: x.item(1) * x, A), "m_tolist": (lambda x: np.array(x.tolist()) * 2, A),
    "real_imag": (lambda x: x.real * 2 + (x * 1j).imag, A),
    # shape
    "transpose": (lambda x: np.transpose(x, (2, 0, 1)), T234),
    "reshape": (lambda x: np.reshape(x, (4, 3)), A), "ravel": (lambda x: np.ravel(x), T234),
    "swapaxes": (lambda x: np.swapaxes(x, 0, 1), A),
    "moveaxis": (lambda x: np.moveaxis(x, 0, -1), T234),
    "squeeze": (lambda x: np.squeeze(x[:, None]), A),
    "expand_dims": (lambda x: np.expand_dims(x, 1), A),
    "concatenate": (lambda x: np.concatenate([x, 2 * x, x[:1]], axis=0), A),
    "concatenate_axis1": (lambda x: np.concatenate((x, x ** 2), axis=1), A),
    "stack": (lambda x: np.stack([x, x * x], axis=1), A),
    "hstack": (lambda x: np.hstack([x, x]), A),
    "vstack": (lambda x: np.vstack([x, x[0]]), A), "dstack": (lambda x: np.dstack([x, x]), A),
    "split": (lambda x: np.split(x, 2, axis=1)[1] * np.split(x, 2, axis=1)[0], A),
    "array_split": (lambda x: np.array_split(x, 3)[2], V4),
    "tile": (lambda x: np.tile(x, (2, 1)), A), "repeat": (lambda x: np.repeat(x, 3, axis=1), A),
    "flip": (lambda x: np.flip(x, 0), A), "fliplr": (lambda x: np.fliplr(x), A),
    "roll": (lambda x: np.roll(x, 1, axis=1), A), "rot90": (lambda x: np.rot90(x), A),
    "pad": (lambda x: np.pad(x, 1), A), "pad_reflect": (lambda x: np.pad(x, 1, mode="reflect"), A),
    "diag": (lambda x: np.diag(x), SQ), "diag_vec": (lambda x: np.diag(x), V3),
    "triu": (lambda x: np.triu(x), SQ), "tril": (lambda x: np.tril(x, -1), SQ),
    "broadcast_to": (lambda x: np.broadcast_to(x, (2, 4)), V4),
    "atleast_2d": (lambda x: np.atleast_2d(x), V4), "diff": (lambda x: np.diff(x, axis=1), A),
    "array_of_list": (lambda x: np.array([x[0, 0], x[1, 1] * 2, 3.0]), A),
    "array_nested_list": (lambda x: np.array([[x[0, 0], 0.0], [x[1, 2], x[0, 0] * x[2, 3]]]), A),
    "full": (lambda x: np.full((2, 2), x[0, 0]), A),
    "linspace": (lambda x: np.linspace(x[0, 0], x[0, 1], 5), A),
    "asarray": (lambda x: np.asarray(x) * 2, A),
    # indexing
    "index_int": (lambda x: x[1], A), "index_neg": (lambda x: x[-1, -2], A),
    "index_slice": (lambda x: x[:, 1:3], A), "index_step": (lambda x: x[::-1, ::2], A),
    "index_lists": (lambda x: x[[0, 2, 2], [1, 1, 3]], A), "index_mask": (lambda x: x[x > 0], A),
    "index_none": (lambda x: x[None, :, None], A), "index_ellipsis": (lambda x: x[..., 0], T234),
    "index_mixed": (lambda x: x[1, [0, 0, 2], 1:3], T234),
    "index_array": (lambda x: x[np.array([1, 0, 1])], A),
    "index_repeated": (lambda x: x[[0, 0, 0]], V4),
    # products
    "matmul": (lambda x: x @ B, A), "matmul_self": (lambda x: x @ x.T, A),
    "matmul_vec": (lambda x: x @ V4, A),
    "matmul_batched": (lambda x: x @ np.swapaxes(x, -1, -2), T234),
    "dot": (lambda x: np.dot(x, B), A), "dot_vec": (lambda x: np.dot(x[0], x[1]), A),
    "einsum": (lambda x: np.einsum("ij,kj->ik", x, x), A),
    "einsum_trace": (lambda x: np.einsum("ii", x), SQ),
    "einsum_batch": (lambda x: np.einsum("bij,bkj->bik", x, x), T234),
    "tensordot": (lambda x: np.tensordot(x, T234, axes=([0, 1], [2, 1])), A.T),
    "outer": (lambda x: np.outer(x, x), V3), "inner": (lambda x: np.inner(x, x), A),
    "kron": (lambda x: np.kron(x, x[:2, :2]), A[:2, :3]), "vdot": (lambda x: np.vdot(x, x), A),
    "cross": (lambda x: np.cross(x[0, :3], x[1, :3]), A),
    # selection
    "where": (lambda x: np.where(x > 0, x, 2 * x ** 2), A),
    "clip": (lambda x: np.clip(x, -0.5, 0.5), A), "sort": (lambda x: np.sort(x, axis=1), A),
    "sort_flat": (lambda x: np.sort(x, axis=None), A),
    "take": (lambda x: np.take(x, [1, 0, 1], axis=1), A),
    "take_along_axis": (lambda x: np.take_along_axis(x, np.argsort(x, axis=1), 1), A),
    "choose": (lambda x: np.choose(np.array([0, 1, 0]), [x[0, :3], x[1, :3]]), A),
    "maximum": (lambda x: np.maximum(x, 0.1), A), "minimum": (lambda x: np.minimum(x, x[0]), A),
    "argmax_index": (lambda x: x[np.argmax(x)], V4),
    "compress": (lambda x: np.compress([True, False, True], x, axis=0), A),
    # elementwise
    "abs": (lambda x: abs(x), A), "pow": (lambda x: x ** 3, A), "rpow": (lambda x: 2.0 ** x, A),
    "pow_arr": (lambda x: x ** POS, POS), "sqrt": (lambda x: np.sqrt(x), POS),
    "log": (lambda x: np.log(x), POS), "exp": (lambda x: np.exp(x), A),
    "tanh": (lambda x: np.tanh(x), A), "sinc": (lambda x: np.sinc(x), A),
    "logaddexp": (lambda x: np.logaddexp(x, 0.5), A), "arctan2": (lambda x: np.arctan2(x, POS), A),
    "hypot": (lambda x: np.hypot(x, 2.0), A), "square": (lambda x: np.square(x), A),
    "reciprocal": (lambda x: np.reciprocal(x), POS),
    "expm1_log1p": (lambda x: np.expm1(np.log1p(x)), POS),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), A),
    "relu": (lambda x: np.maximum(x, 0.0), A), "sign_times": (lambda x: np.sign(x) * x, A),
    "floor_times": (lambda x: np.floor(x) * x, A), "round_times": (lambda x: np.round(x) * x, A),
    "isfinite": (lambda x: np.where(np.isfinite(x), x, 0.0), A),
    # constants from np.random
    "random_constant": (lambda x: x * np.random.RandomState(0).randn(*np.shape(x)), A),
    "random_generator": (lambda x: x @ np.random.default_rng(1).standard_normal((4, 2)), A),
    # math / operator / builtins on floats
    "builtin_sum": (lambda x: sum(x), A), "builtin_sum_list": (lambda x: sum([x[0], x[1] * 2]), A),
    "builtin_max": (lambda x: max(x[0, 0], x[0, 1], x[1, 1]), A),
    "builtin_min_list": (lambda x: min(list(x[0])), A),
    "builtin_abs_pow": (lambda x: abs(x[0, 0]) + pow(x[0, 1], 2), A),
    "math": (lambda x: math.sin(x[0, 0]) * math.exp(x[1, 1]) + math.sqrt(abs(x[2, 2]) + 1), A),
    "math_more": (lambda x: math.atan2(x[0, 0], 2.0) + math.hypot(x[0, 1], x[1, 0]) +
                  math.log(abs(x[1, 1]) + 1) * math.tanh(x[2, 0]), A),
    "operator": (lambda x: operator.mul(x, x) + operator.truediv(x, 2.0), A),
    "float": (lambda x: float(x[0, 0]) * 2, A),
}


@pytest.mark.parametrize("name", list(NUMPY_CASES))
def test_numpy(name):
    fun, x = NUMPY_CASES[name]
    check_grads(fun, x)


# Forward mode agrees with reverse mode on the same surface (jacrev == jacfwd).
REV_FWD = [n for n in NUMPY_CASES if not n.startswith(("builtin_min_list", "m_tolist"))]


@pytest.mark.parametrize("name", REV_FWD)
def test_jacrev_equals_jacfwd(name):
    fun, x = NUMPY_CASES[name]
    check_rev_fwd(fun, x)


def test_autograd_style_specifics():
    # autograd's test_numpy: index_ints, index_slice, index_lists, index_mixed, vector_slice
    x = R(5, 6, 4)

    def f(x):
        return x[3, 0, 1] + x[1:3, 2, :] @ np.ones(4) * 0.5
    check_grads(f, x)
    check_grads(lambda v: v[2:4], R(6))
    # max and min: ties between differentiated values split evenly, a tie with a constant
    # gives the constant's zero derivative (documented elements of the subdifferential)
    np.testing.assert_allclose(grad(lambda v: np.max(v))(np.array([1.0, 3.0, 3.0])),
                               [0.0, 0.5, 0.5])
    assert grad(lambda v: max(v, 2.0))(2.0) == 0.0
    assert grad(max, argnums=(0, 1))(2.0, 2.0) == (0.5, 0.5)
    # abs'(0) = 0, relu'(0) = 0
    assert grad(abs)(0.0) == 0.0
    np.testing.assert_array_equal(grad(lambda v: np.sum(np.maximum(v, 0.0)))(np.zeros(2)),
                                  [0.0, 0.0])
    np.testing.assert_array_equal(grad(lambda v: np.sum(np.abs(v)))(np.zeros(2)), [0.0, 0.0])


@pytest.mark.skipif(sc is None, reason="scipy not installed")
def test_scipy_special():
    x = U(0.3, 2.0, 3)
    check_grads(lambda v: sc.logsumexp(v), x)
    check_grads(lambda v: sc.expit(v) * sc.gammaln(v) + sc.erf(v), x)
    check_grads(lambda v: sc.softmax(v), x)


# -- linalg (autograd's test_linalg.py) --------------------------------------------------------

def sym(x):
    return 0.5 * (x + x.T)


LINALG_CASES = {
    "inv": (lambda x: np.linalg.inv(x), SQ),
    "solve_vec": (lambda x: np.linalg.solve(x, V3), SQ),
    "solve_mat": (lambda x: np.linalg.solve(x, np.ones((3, 2))), SQ),
    "solve_rhs": (lambda b: np.linalg.solve(SQ, b), R(3, 2)),
    "det": (lambda x: np.linalg.det(x), SQ),
    "det_batched": (lambda x: np.linalg.det(x), R(2, 3, 3)),
    "slogdet": (lambda x: np.linalg.slogdet(x)[1], SQ),
    "slogdet_named": (lambda x: np.linalg.slogdet(x).logabsdet, SQ),
    "cholesky": (lambda x: np.linalg.cholesky(x @ x.T + 3 * np.eye(3)), SQ),
    "eigh_values": (lambda x: np.linalg.eigh(sym(x))[0], SQ),
    "eigh_vectors_squared": (lambda x: np.linalg.eigh(sym(x))[1] ** 2, SQ),
    "eigh_named": (lambda x: np.linalg.eigh(sym(x)).eigenvalues, SQ),
    "eigvalsh": (lambda x: np.linalg.eigvalsh(sym(x)), SQ),
    "svd_values": (lambda x: np.linalg.svd(x, compute_uv=False), A),
    "svd_reconstruct": (lambda x: (lambda u, s, vh: (u * s) @ vh)(
        *np.linalg.svd(x, full_matrices=False)), A),
    "svd_abs_u": (lambda x: np.abs(np.linalg.svd(x, full_matrices=False)[0]), A),
    "norm": (lambda x: np.linalg.norm(x), A),
    "norm_fro": (lambda x: np.linalg.norm(x, "fro"), A),
    "norm_nuc": (lambda x: np.linalg.norm(x, "nuc"), A),
    "norm_2": (lambda x: np.linalg.norm(x, 2), A),
    "norm_axis": (lambda x: np.linalg.norm(x, axis=1), A),
    "norm_vec_inf": (lambda x: np.linalg.norm(x, np.inf), V4),
    "norm_vec_1": (lambda x: np.linalg.norm(x, 1), V4),
    "norm_vec_3": (lambda x: np.linalg.norm(x, 3), V4),
    "qr_r": (lambda x: np.linalg.qr(x)[1], A.T),
    "qr_q": (lambda x: np.linalg.qr(x)[0], A.T),
    "matrix_power": (lambda x: np.linalg.matrix_power(x, 3), SQ),
    "multi_dot": (lambda x: np.linalg.multi_dot([x, B, B.T]), A),
    "inv_of_solve": (lambda x: np.linalg.inv(np.linalg.solve(x, x.T @ x + np.eye(3))), SQ),
}


@pytest.mark.parametrize("name", list(LINALG_CASES))
def test_linalg(name):
    fun, x = LINALG_CASES[name]
    check_grads(fun, x, rtol=1e-4)


@pytest.mark.parametrize("name", ["inv", "solve_vec", "det", "slogdet", "cholesky",
                                  "eigh_values", "svd_values", "norm_nuc", "qr_r"])
def test_linalg_jacrev_equals_jacfwd(name):
    fun, x = LINALG_CASES[name]
    check_rev_fwd(fun, x, rtol=1e-7, atol=1e-9)


def test_linalg_lstsq():
    check_grads(lambda x: np.linalg.lstsq(x, np.ones(3), rcond=None)[0], A[:, :3])


# NumPy functions without a rule of their own whose implementation is Python: differentiated
# through NumPy's own code (the primitives it calls have rules).
IMPLEMENTATION_CASES = {
    "pinv": (lambda x: np.linalg.pinv(x), A), "cond": (lambda x: np.linalg.cond(x), SQ),
    "tensorsolve": (lambda x: np.linalg.tensorsolve(x, V3), SQ),
    "polyval": (lambda x: np.polyval(x, 0.7) + np.polyval([1.0, -2.0, 0.5], x), V4),
    "trapezoid": (lambda x: np.trapezoid(x, dx=0.5), V4),
    "gradient": (lambda x: np.gradient(x), V4),
    "cov": (lambda x: np.cov(x), A), "corrcoef": (lambda x: np.corrcoef(x), A),
    "meshgrid": (lambda x: np.meshgrid(x, x[:2])[0] * np.meshgrid(x, x[:2])[1], V4),
    "select": (lambda x: np.select([x > 0, x < -1], [x, x ** 2], default=0.5), V4),
    "block": (lambda x: np.block([[x[:2, :2], x[:2, 2:]], [x[2:, :2], x[2:, 2:]]]), A),
    "rollaxis": (lambda x: np.rollaxis(x, 2), T234), "unwrap": (lambda x: np.unwrap(3 * x), V4),
    "resize": (lambda x: np.resize(x, 7), V4),
    "column_stack": (lambda x: np.column_stack([x, x]), V4),
    "r_": (lambda x: np.r_[x, 2 * x], V4),
    "real_if_close": (lambda x: np.real_if_close(x + 0j), V4),
    "insert": (lambda x: np.insert(x, 1, 5.0), V4),  # (through _array_converter's stand-in)
    "correlate": (lambda x: np.correlate(x, [1.0, 2.0]), V4),  # (stand-in: a convolution)
    "quantile": (lambda x: np.quantile(x, [0.3, 0.5], axis=0), A),  # (stand-in: sorted)
}


@pytest.mark.parametrize("name", list(IMPLEMENTATION_CASES))
def test_numpy_through_its_implementation(name):
    fun, x = IMPLEMENTATION_CASES[name]
    check_grads(fun, x, rtol=1e-4)


MISSING = {
    "fromiter": lambda x: np.fromiter((a for a in x), float),
    "reduceat": lambda x: np.maximum.reduceat(x, [0, 2]),
    "frompyfunc": lambda x: np.frompyfunc(lambda t: t * t, 1, 1)(x).astype(float),
}


@pytest.mark.parametrize("name", list(MISSING))
def test_missing_rules_are_errors_not_silent_zeros(name):
    with pytest.raises(MissingRuleError):
        grad(lambda v: np.sum(MISSING[name](v)))(V4)


def test_histogram_weights():
    g = grad(lambda w: np.histogram(np.arange(6.0), bins=3, weights=w)[0][0])(np.ones(6))
    np.testing.assert_allclose(g, [1, 1, 0, 0, 0, 0])


# -- fft ---------------------------------------------------------------------------------------

FFT_CASES = {
    "fft": (lambda x: np.fft.fft(x), R(6)), "ifft": (lambda x: np.fft.ifft(x), Cx(6)),
    "fft_axis": (lambda x: np.fft.fft(x, axis=0), A), "fft_n": (lambda x: np.fft.fft(x, n=8), R(5)),
    "rfft": (lambda x: np.fft.rfft(x), R(6)), "irfft": (lambda x: np.fft.irfft(x), Cx(4)),
    "rfft_roundtrip": (lambda x: np.fft.irfft(np.fft.rfft(x) * 2), R(6)),
    "fft2": (lambda x: np.fft.fft2(x), A), "ifft2": (lambda x: np.fft.ifft2(x), Cx(3, 4)),
    "fftn": (lambda x: np.fft.fftn(x), T234), "rfft2": (lambda x: np.fft.rfft2(x), A),
    "fftshift": (lambda x: np.fft.fftshift(x), A),
    "ortho": (lambda x: np.fft.fft(x, norm="ortho"), Cx(5)),
    "abs_fft": (lambda x: np.abs(np.fft.fft(x)), R(6)),
}


@pytest.mark.parametrize("name", list(FFT_CASES))
def test_fft(name):
    fun, x = FFT_CASES[name]
    check_grads(fun, x)


# -- systematic: broadcasting in every binary op (autograd's test_systematic.py) -----------------

BINARY = {
    "add": (operator.add, (-2, 2), (-2, 2)), "sub": (operator.sub, (-2, 2), (-2, 2)),
    "mul": (operator.mul, (-2, 2), (-2, 2)), "truediv": (operator.truediv, (-2, 2), (0.5, 2)),
    "pow": (operator.pow, (0.5, 2), (-2, 2)), "np_add": (np.add, (-2, 2), (-2, 2)),
    "np_multiply": (np.multiply, (-2, 2), (-2, 2)), "np_divide": (np.divide, (-2, 2), (0.5, 2)),
    "np_power": (np.power, (0.5, 2), (-2, 2)), "maximum": (np.maximum, (-2, 2), (-2, 2)),
    "minimum": (np.minimum, (-2, 2), (-2, 2)), "arctan2": (np.arctan2, (0.5, 2), (-2, 2)),
    "hypot": (np.hypot, (0.5, 2), (-2, 2)), "logaddexp": (np.logaddexp, (-2, 2), (-2, 2)),
    "where": (lambda x, y: np.where(x > 0, x * y, y), (-2, 2), (-2, 2)),
    "mod": (np.mod, (0.1, 2), (2.5, 3)),
}


@pytest.mark.parametrize("name", list(BINARY))
@_SETTINGS
@given(data=st.data())
def test_binary_broadcasting(name, data):
    fn, (lx, hx), (ly, hy) = BINARY[name]
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                         max_side=3))
    x = data.draw(_array(shapes.input_shapes[0], lx, hx))
    y = data.draw(_array(shapes.input_shapes[1], ly, hy))
    if name in ("maximum", "minimum", "where"):  # keep finite differences away from the kinks
        x = np.where(np.abs(x) < 1e-2, x + 0.1, x)
        y = np.where(np.abs(x - y) < 1e-2, y + 0.1, y)  # (after x moved: no tie is left)

    def f(a, b):
        return fn(a, b)
    check_grads(f, x, y)
    gx, gy = jacrev(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, jacfwd(f, 0)(x, y), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gy, jacfwd(f, 1)(x, y), rtol=1e-9, atol=1e-12)


UNARY = {"sin": np.sin, "exp": np.exp, "tanh": np.tanh, "square": np.square,
         "sum": np.sum, "cumsum": np.cumsum, "sort": np.sort, "softmax": softmax,
         "logsumexp": logsumexp, "flip": np.flip, "negative": operator.neg}


@pytest.mark.parametrize("name", list(UNARY))
@_SETTINGS
@given(x=hnp.array_shapes(min_dims=1, max_dims=3, max_side=3).flatmap(
    lambda shape: hnp.arrays(np.int64, shape, elements=st.integers(-40, 40), unique=True)))
def test_unary_random_shapes(name, x):
    x = x * 0.05   # distinct values: no ties for sort to break
    fn = UNARY[name]

    def f(v):
        return fn(v)
    check_grads(f, x)
    check_rev_fwd(f, x)


@_SETTINGS
@given(x=_array((4,), -1, 1), w=_array((4, 3), -1, 1))
def test_composition_random_values(x, w):
    def f(v, m):
        h = np.tanh(v @ m)
        return np.sum(h ** 2) + logsumexp(h) * v[0]
    check_grads(f, x, w)
    np.testing.assert_allclose(grad(f)(x, w), jacfwd(f)(x, w), rtol=1e-9, atol=1e-12)


# -- nesting (autograd's test_wrappers.py) ------------------------------------------------------

def test_grad_of_grad():
    assert grad(grad(f_poly))(2.0) == pytest.approx(18.0 * 2.0)
    assert grad(grad(grad(lambda x: x ** 4)))(1.5) == pytest.approx(24 * 1.5)
    assert grad(grad(lambda x: math.sin(x) * x))(0.7) == pytest.approx(
        2 * math.cos(0.7) - 0.7 * math.sin(0.7))


def f_hess(x):
    return np.sum(np.sin(x) * x ** 2) + x[0] * x[1] * x[2]


def h_hess(x):
    h = np.diag(2 * np.sin(x) + 4 * x * np.cos(x) - x ** 2 * np.sin(x))
    h[0, 1] += x[2]
    h[1, 0] += x[2]
    h[0, 2] += x[1]
    h[2, 0] += x[1]
    h[1, 2] += x[0]
    h[2, 1] += x[0]
    return h


def test_hessian_and_hvp():
    x = np.array([0.3, -1.2, 0.8])
    np.testing.assert_allclose(hessian(f_hess)(x), h_hess(x), rtol=1e-10, atol=1e-12)
    v = np.array([1.0, 2.0, -0.5])
    np.testing.assert_allclose(hvp(f_hess, x, v), h_hess(x) @ v, rtol=1e-10)
    np.testing.assert_allclose(jacrev(grad(f_hess))(x), h_hess(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jacrev(jacrev(f_hess))(x), h_hess(x), rtol=1e-10, atol=1e-12)
    assert hessian(f_poly)(2.0) == pytest.approx(36.0)


def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def rosenbrock_hessian(x):
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 1200 * x[i] ** 2 - 400 * x[i + 1] + 2
        h[i, i + 1] -= 400 * x[i]
        h[i + 1, i] -= 400 * x[i]
        h[i + 1, i + 1] += 200
    return h


def test_hessian_of_a_scalar_loop():
    x = np.array([0.5, 1.2, -0.3, 0.8])
    np.testing.assert_allclose(grad(rosenbrock)(x), fd(rosenbrock, x), rtol=1e-6)
    np.testing.assert_allclose(hessian(rosenbrock)(x), rosenbrock_hessian(x), rtol=1e-12)
    np.testing.assert_allclose(hvp(rosenbrock, x, np.ones(4)), rosenbrock_hessian(x) @ np.ones(4))
    np.testing.assert_allclose(jacrev(grad(rosenbrock))(x), rosenbrock_hessian(x), rtol=1e-12)


def test_no_perturbation_confusion():
    assert grad(lambda x: x * grad(lambda y: x * y)(3.0))(5.0) == 10.0
    assert derivative(lambda x: x * grad(lambda y: x * y)(3.0))(5.0) == 10.0
    assert grad(lambda x: x * derivative(lambda y: x * y)(3.0))(5.0) == 10.0

    def g(x):
        def inner(y):
            return x * y
        return grad(inner)(2.0) * x       # x * x
    assert grad(g)(3.0) == 6.0


def jvp_inside(x):
    return jvp(lambda y: y * y * x, (x,), (1.0,))[1]   # d/dy (y^2 x) at y=x: 2 x^2


def test_reverse_over_forward():
    assert grad(jvp_inside)(3.0) == pytest.approx(12.0)
    x = np.array([0.2, 0.7])

    def f(v):
        return np.sum(jacfwd(lambda u: np.sin(u) * v[0])(v))
    check_grads(f, x)


def f_ctx(x):
    return x * x + math.sin(x)


def test_grad_inside_counting_and_tracing_contexts():
    counter = CountContext()
    assert overdub(counter, grad(f_ctx), 1.5) == pytest.approx(3.0 + math.cos(1.5))
    forward_only = CountContext()
    overdub(forward_only, f_ctx, 1.5)
    # the counting context sees the arithmetic of the backward sweep too
    assert counter.counts[operator.mul] > forward_only.counts[operator.mul]
    assert counter.counts[math.cos] >= 1
    tracer = TraceContext()
    assert overdub(tracer, grad(f_ctx), 1.5) == pytest.approx(3.0 + math.cos(1.5))
    assert tracer.trace


def test_derivative_of_a_function_that_calls_grad():
    expected = (2 - math.sin(1.5)) * 1.5 + 2 * 1.5 + math.cos(1.5)
    assert derivative(lambda y: grad(f_ctx)(y) * y)(1.5) == pytest.approx(expected)
    assert grad(lambda y: grad(f_ctx)(y) * y)(1.5) == pytest.approx(expected)
    assert grad(lambda y: overdub(CountContext(), grad(f_ctx), y))(1.5) == pytest.approx(
        2 - math.sin(1.5))
    # jacfwd of jacrev, jacrev of jacrev
    x = np.array([0.4, 1.1])
    fun = lambda v: np.sin(v) * v ** 2  # noqa: E731
    np.testing.assert_allclose(jacfwd(jacrev(fun))(x), jacrev(jacrev(fun))(x), atol=1e-12)


def test_grad_of_a_function_returning_a_closure_value():
    def make(x):
        def scaled(y):
            return x * y
        return scaled
    assert grad(lambda x: make(x)(4.0) * x)(3.0) == 24.0


# -- custom rules, checkpoint ------------------------------------------------------------------

@custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(_, ct):
    return (np.clip(ct, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@custom_vjp
def safe_log1pexp(x):
    return np.logaddexp(0.0, x)


def _softplus_fwd(x):
    return safe_log1pexp(x), x


def _softplus_bwd(x, ct):
    return (ct / (1.0 + np.exp(-x)),)


safe_log1pexp.defvjp(_softplus_fwd, _softplus_bwd)


def test_custom_vjp():
    assert grad(lambda x: clip_gradient(x * 5.0))(1.0) == 5.0
    assert grad(lambda x: clip_gradient(x) * 5.0)(1.0) == 1.0 * 1.0
    x = np.array([-30.0, 0.0, 800.0])
    np.testing.assert_allclose(grad(lambda v: np.sum(safe_log1pexp(v)))(x), [0.0, 0.5, 1.0],
                               atol=1e-12)
    # forward mode differentiates the function itself
    assert jvp(lambda x: clip_gradient(x * 5.0), (1.0,), (1.0,)) == (5.0, 5.0)
    # nested: grad of grad through a custom rule
    assert grad(grad(lambda v: safe_log1pexp(v)))(0.0) == pytest.approx(0.25)


def my_square(x):
    return x * x


def test_defvjp_for_a_user_function(isolated_rules):
    defvjp(my_square, lambda ct, out, x: ct * 2 * x * 10)   # deliberately scaled: rule is used
    assert grad(my_square)(3.0) == 60.0
    assert grad(lambda v: my_square(v) + v)(3.0) == 61.0


def mlp_layer(h, w):
    return np.tanh(h @ w)


def deep_net(x, ws, ckpt):
    layer = checkpoint(mlp_layer) if ckpt else mlp_layer
    h = x
    for w in ws:
        h = layer(h, w)
    return np.sum(h ** 2)


def test_checkpoint_gives_identical_gradients(rng):
    x = rng.standard_normal((4, 8))
    ws = [rng.standard_normal((8, 8)) / 3 for _ in range(5)]
    g_plain = grad(deep_net, argnums=(0, 1))(x, ws, False)
    g_ckpt = grad(deep_net, argnums=(0, 1))(x, ws, True)
    np.testing.assert_array_equal(g_plain[0], g_ckpt[0])
    for a, b in zip(g_plain[1], g_ckpt[1]):
        np.testing.assert_array_equal(a, b)
    check_grads(lambda v: deep_net(v, ws, True), x)
    np.testing.assert_allclose(hvp(lambda v: deep_net(v, ws, True), x, np.ones_like(x)),
                               hvp(lambda v: deep_net(v, ws, False), x, np.ones_like(x)))


def _peak(fun):
    gc.collect()
    tracemalloc.start()
    try:
        fun()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def mlp_block(h, ws):
    for w in ws:
        h = np.tanh(h @ w)
    return h


def blocked_net(x, ws, ckpt):
    """100 layers in 10 blocks of 10; with ``ckpt`` each block is checkpointed (sqrt(n))."""
    block = checkpoint(mlp_block) if ckpt else mlp_block
    h = x
    for start in range(0, len(ws), 10):
        h = block(h, ws[start:start + 10])
    return np.sum(h ** 2)


def test_checkpoint_reduces_peak_memory_of_a_deep_mlp(rng):
    x = rng.standard_normal((64, 128))
    ws = [rng.standard_normal((128, 128)) / 12 for _ in range(100)]
    g_plain = grad(blocked_net)(x, ws, False)
    np.testing.assert_array_equal(g_plain, grad(blocked_net)(x, ws, True))
    np.testing.assert_array_equal(g_plain, grad(deep_net)(x, ws, True))
    plain = _peak(lambda: grad(blocked_net)(x, ws, False))
    blocks = _peak(lambda: grad(blocked_net)(x, ws, True))
    layers = _peak(lambda: grad(deep_net)(x, ws, True))
    # without checkpointing each of the 100 layers keeps its (64, 128) activation (64 KiB; the
    # tape keeps only what the rules read: tanh's output, not its input); checkpointed blocks
    # keep 10 block inputs and one block's tape; checkpointed layers keep each layer's input,
    # which is no more than the plain gradient keeps
    assert blocks < 0.3 * plain, (plain, blocks)
    assert layers < 1.1 * plain, (plain, layers)


def test_tape_is_released_when_grad_returns():
    refs = []

    class Box:
        pass

    def f(x):
        big = np.ones(10_000) * x
        box = Box()
        box.values = big
        refs.append(weakref.ref(box))
        return np.sum(np.sin(big))
    grad(f)(0.5)
    assert refs and refs[0]() is None   # no gc.collect(): released, not just collectable
    value_and_grad(f)(0.5)
    assert refs[1]() is None
    jacrev(f)(0.5)
    assert refs[2]() is None


# -- mutation ----------------------------------------------------------------------------------

X3 = np.array([1.0, 2.0, 3.0])


def m_setitem(x):
    a = np.zeros(3)
    a[1] = x[0] * x[1]
    a[2] = x[2]
    return np.sum(a * a)


def m_mask(x):
    a = np.ones(3)
    a[x > 1.0] = x[:2] ** 2
    b = x.copy()
    b[b < 1.5] = 0.0
    return np.sum(a) + np.sum(b * x)


def m_augmented(x):
    a = np.ones(3)
    a += x
    a *= x
    a -= 1.0
    a /= 2.0
    a **= 2
    return np.sum(a)


def m_out(x):
    a = np.zeros(3)
    np.multiply(x, x, out=a)
    np.add(a, x, out=a)
    np.sin(a, out=a)
    return np.sum(a)


def m_overwritten(x):
    a = x * 2
    b = a * a          # needs the old a
    c = np.exp(a)      # needs its own output
    a[:] = 0.0
    c += 1.0
    return np.sum(b) + np.sum(a) + np.sum(c)


def m_recurrence(x):
    a = x * 1.0
    for i in range(1, len(a)):
        a[i] = a[i - 1] * a[i] + a[i]
    return a[-1]


def m_views(x):
    a = np.zeros((3, 3))
    for i in range(3):
        a[i][i] = x[i] ** 2        # a[i] is a view: the write reaches a
    row = a[1]
    a[1, 0] = x[0]                 # a view read after a write sees the new value
    b = a[:, 1:]
    b *= 2.0                       # augmented assignment through a view
    return np.sum(a * a) + np.sum(row)


def m_lists(x):
    acc = []
    for v in x:
        acc.append(v * 2)
    acc.insert(0, x[0])
    acc.extend([x[1] ** 2])
    first = acc.pop(0)
    acc[1] = acc[1] * 10
    return first * sum(acc) + np.sum(np.stack(acc))


def m_dict(x):
    d = {}
    d["a"] = x[0] * 2
    d.setdefault("b", x[1])
    return sum(d.values()) * x[2]


def m_methods(x):
    a = x.copy()
    a.sort()
    b = np.empty(3)
    b.fill(0.5)
    b[:2] = a[1:]
    return a[0] * 10 + np.sum(b * x)


def m_inplace_numpy(x):
    a = np.zeros(4)
    np.add.at(a, [0, 0, 3], x)
    np.put(a, [1], x[2] * 2)
    m = np.zeros((3, 3))
    np.fill_diagonal(m, x)
    return np.sum(a * np.arange(1.0, 5.0)) + np.sum(m @ x)


MUTATION = {"setitem": m_setitem, "mask": m_mask, "augmented": m_augmented, "out": m_out,
            "overwritten": m_overwritten, "recurrence": m_recurrence, "views": m_views,
            "lists": m_lists, "dict": m_dict, "methods": m_methods,
            "inplace_numpy": m_inplace_numpy}


@pytest.mark.parametrize("name", list(MUTATION))
def test_mutation(name):
    fun = MUTATION[name]
    x = np.array([1.1, 2.3, 0.7])
    expected = fd(fun, x)
    np.testing.assert_allclose(grad(fun)(x), expected, rtol=1e-6, atol=1e-8)
    check_grads(fun, x)
    assert np.array_equal(x, [1.1, 2.3, 0.7])   # the input was not written


def _fd_hessian(fun, x):
    return np.array([fd(lambda v, i=i: grad(fun)(v)[i], x) for i in range(len(x))])


@pytest.mark.parametrize("name", list(MUTATION))
def test_mutation_reverse_over_reverse(name):
    fun = MUTATION[name]
    x = np.array([1.1, 2.3, 0.7])
    np.testing.assert_allclose(jacrev(grad(fun))(x), _fd_hessian(fun, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(MUTATION))
def test_mutation_forward_over_reverse(name):
    fun = MUTATION[name]
    x = np.array([1.1, 2.3, 0.7])
    np.testing.assert_allclose(hessian(fun)(x), _fd_hessian(fun, x), rtol=1e-5, atol=1e-6)


CACHE = np.zeros(3)             # a preallocated array outside the function
BUFFER = np.zeros(3)


def f_bang(z, y, x):
    x[:] = 2 * y
    z[:] = np.sin(x)


def sum_of_z(y):
    z = np.zeros(3)
    f_bang(z, y, BUFFER)        # through a closure over a preallocated global
    return np.sum(z)


def cached_square(x):
    CACHE[:] = x ** 2
    CACHE[0] += x[1]
    return np.sum(CACHE * x)


def make_loss(x):
    """The issue's example: f_bang used through a closure over a preallocated global x."""
    def loss(y):
        z = np.zeros(3)
        f_bang(z, y, x)
        return np.sum(z)
    return loss


PREALLOCATED = np.zeros(3)
closure_loss = make_loss(PREALLOCATED)


def test_f_bang_through_a_closure_over_a_preallocated_global():
    y = np.array([0.3, -1.1, 2.0])
    for _ in range(2):
        np.testing.assert_allclose(grad(closure_loss)(y), 2 * np.cos(2 * y), rtol=1e-12)
        assert type(PREALLOCATED) is np.ndarray and np.array_equal(PREALLOCATED, 2 * y)
    check_grads(closure_loss, y)
    np.testing.assert_allclose(hessian(closure_loss)(y), np.diag(-4 * np.sin(2 * y)),
                               atol=1e-12)


def test_writes_into_arrays_created_outside_the_function():
    y = np.array([0.1, 0.5, -0.7])
    for _ in range(2):          # a second grad call on the same cache works
        np.testing.assert_allclose(grad(sum_of_z)(y), 2 * np.cos(2 * y), rtol=1e-12)
        assert type(BUFFER) is np.ndarray and np.array_equal(BUFFER, 2 * y)   # plain numbers
    x = np.array([0.3, 1.2, 2.0])
    for _ in range(2):
        np.testing.assert_allclose(grad(cached_square)(x), fd(cached_square, x), rtol=1e-6)
        assert all(type(v) is np.float64 for v in CACHE)


GLOBAL_LIST = []
GLOBAL_DICT = {}


def stores_globally(x):
    GLOBAL_LIST.append(x * 2)
    GLOBAL_DICT["k"] = [x, x ** 2]
    return GLOBAL_LIST[-1] * GLOBAL_DICT["k"][1]


def test_nothing_leaks_into_containers_outside():
    assert grad(stores_globally)(1.5) == pytest.approx(6 * 1.5 ** 2)
    assert type(GLOBAL_LIST[-1]) is float and GLOBAL_LIST[-1] == 3.0
    assert [type(v) for v in GLOBAL_DICT["k"]] == [float, float]


# -- control flow ------------------------------------------------------------------------------

def piecewise(x):
    if x > 0:
        return x ** 2
    return -3.0 * x


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12:      # data-dependent trip count
        x = 0.5 * (x + a / x)
    return x


def power(x, n):
    return 1.0 if n == 0 else x * power(x, n - 1)


def loop_with_break(x):
    total = 0.0
    for i in range(100):
        total = total + x * i
        if total > 10:
            break
    return total


def test_control_flow():
    assert grad(piecewise)(2.0) == 4.0 and grad(piecewise)(-2.0) == -3.0
    assert grad(newton_sqrt)(2.0) == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-9)
    assert grad(power)(1.5, 5) == pytest.approx(5 * 1.5 ** 4)
    assert grad(loop_with_break)(1.0) == pytest.approx(sum(range(6)))   # stops at i = 5
    np.testing.assert_allclose(
        grad(lambda v: np.sum(np.where(v > 0, v, -v)))(np.array([1.0, -2.0])), [1.0, -1.0])


def iterate_rows(m):
    total = 0.0
    for row in m:
        a, b = row[:2]
        total = total + a * b
    return total + sum(v ** 2 for v in m[0]) + max(*m[1])


def test_iteration_over_differentiated_arrays():
    m = np.array([[1.0, 2.0, 0.5], [3.0, -1.0, 4.0]])
    expected = fd(iterate_rows, m)
    np.testing.assert_allclose(grad(iterate_rows)(m), expected, rtol=1e-6)
    assert grad(lambda v: sum(a * b for a, b in zip(v, v[::-1])))(np.arange(3.0)).tolist() == \
        [4.0, 2.0, 0.0]
    assert grad(lambda v: sum(i * a for i, a in enumerate(v)))(np.ones(3)).tolist() == \
        [0.0, 1.0, 2.0]


def iterators_and_movers(v):
    import bisect
    import functools
    import heapq
    import itertools
    total = math.fsum(a * a for a in v) + math.prod(a for a in v) + max(a * 2 for a in v)
    heap = []
    for a in v:
        heapq.heappush(heap, a * 3)
    total = total + heapq.heappop(heap) * sum(heap)
    ordered = [0.5]
    bisect.insort(ordered, v[1])
    total = total + ordered[-1] * sum(itertools.chain([v[0]], itertools.islice(v, 1, None)))
    total = total + list(itertools.accumulate(v))[-1] * functools.reduce(operator.mul, v)
    options = dict(scale=v[0] * 2, shift=v[2])
    return total + sum(options.values()) + sum(a * b for a, b in itertools.product(v[:2], v))


def test_iterators_heaps_and_itertools():
    x = np.array([1.1, 0.7, 2.3])
    np.testing.assert_allclose(grad(iterators_and_movers)(x), fd(iterators_and_movers, x),
                               rtol=1e-6)


# -- non-differentiable functions and missing rules ----------------------------------------------

def uses_nondifferentiable(x):
    k = int(np.argmax(x))
    n = np.sum(x > 0)
    mask = np.floor(x) == 0.0
    order = np.argsort(x)
    return x[k] * n + np.sum(x[mask]) + x[order[0]] + (x[0] // 1.0)


def test_non_differentiable_functions_pass_through():
    x = np.array([0.5, 2.5, -1.5])
    g = grad(uses_nondifferentiable)(x)
    np.testing.assert_allclose(g, fd(uses_nondifferentiable, x, h=1e-7), atol=1e-6)


def test_a_c_function_without_a_rule_is_a_missing_rule_error():
    import array as arr

    def f(x):
        return np.fromiter((a for a in x), float)[0]
    with pytest.raises(MissingRuleError, match="fromiter"):
        grad(f)(np.ones(2) * 2)

    def g(x):
        buffer = arr.array("d", [0.0])
        buffer.append(x)          # a C container method with no rule
        return buffer[1]
    with pytest.raises(MissingRuleError, match="append"):
        grad(g)(1.0)


def test_a_function_without_source_is_an_error_not_a_silent_zero():
    namespace = {"np": np}
    exec("def no_source(x):\n    return np.sum(np.sin(x))\n", namespace)
    with pytest.raises(MissingRuleError, match="no_source"):
        grad(namespace["no_source"])(np.ones(2))
    with pytest.raises(MissingRuleError, match="no_source"):
        grad(lambda v: namespace["no_source"](v) * 2)(np.ones(2))


def test_keyword_argument_with_a_derivative_is_bound_or_an_error():
    def f(x):
        return np.sum(np.clip(np.arange(3.0), a_min=x, a_max=1.5))
    assert grad(f)(0.5) == 1.0     # bound to its position


# -- complex -----------------------------------------------------------------------------------

def test_real_function_of_complex_input_convention():
    z = 1.0 + 2.0j
    assert grad(lambda w: abs(w) ** 2)(z) == pytest.approx(2 * np.conj(z))
    zs = Cx(3)
    np.testing.assert_allclose(grad(lambda w: np.sum(np.abs(w) ** 2))(zs), 2 * np.conj(zs))

    def f(w):
        return np.real(w) ** 2 * np.imag(w) + np.sum(np.sin(w).real)
    z0 = 0.3 - 0.7j
    dfdx = fd(lambda t: f(z0 + t), 0.0)
    dfdy = fd(lambda t: f(z0 + 1j * t), 0.0)
    assert grad(f)(z0) == pytest.approx(dfdx - 1j * dfdy, rel=1e-7)
    check_grads(lambda w: np.abs(np.fft.fft(w)) ** 2, Cx(4))


def test_holomorphic():
    z = 0.4 + 0.9j
    assert grad(lambda w: w * w, holomorphic=True)(z) == pytest.approx(2 * z)
    assert grad(np.sin, holomorphic=True)(z) == pytest.approx(np.cos(z))
    assert grad(lambda w: np.exp(w) * w, holomorphic=True)(z) == pytest.approx(
        np.exp(z) * (1 + z))
    assert derivative(lambda w: w * w)(z) == pytest.approx(grad(lambda w: w * w,
                                                                holomorphic=True)(z))


# -- scalar code specialised (overdub_ad.reverse._specialise) --------------------------------------
# Functions of float arithmetic run as compiled versions that expand each expression in place
# (one tape entry per expression); whatever those do not handle goes through the context.

def sp_rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def sp_rates(x, y, z):
    return 10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z


def sp_rk4(x0, steps=20, h=0.01):
    x, y, z = x0, 1.0, 1.0
    for _ in range(steps):
        k1 = sp_rates(x, y, z)
        k2 = sp_rates(x + h / 2 * k1[0], y + h / 2 * k1[1], z + h / 2 * k1[2])
        x = x + h * k2[0]
        y = y + h * k2[1]
        z = z + h * k2[2]
    return x + y + z


def sp_control(x, a=2.0, *, b=3.0):
    s = 0.0
    i = 0
    while i < 4:
        s += a * x ** 3 - b / x
        i += 1
        if s > 50.0:
            break
    for k in range(3):
        if k == 1:
            continue
        s = s - k * x
    else:
        s = s * 1.5
    t = -s if s < 0 else +s
    return t + (x ** x) + 2 ** x + x ** 0 + (x and 1.0)


def sp_mixed(x):
    v = np.sin(x) * 2.0            # arrays: through the context
    total = 0.0
    parts = []
    for i in range(len(x)):
        w = v[i] * x[i] + math.exp(x[i]) / 3
        parts.append(w)
        total += w
    m = np.zeros(2)
    m[0] = total                   # an in-place write
    m[1] = sum(parts) ** 2
    return m[0] * m[1] + np.sum(v[1:] * x[:-1])


class SpVec:
    def __init__(self, a):
        self.a = a

    def __mul__(self, other):
        return SpVec(self.a * other + self.a)


def sp_objects(x):
    v = SpVec(x) * 3.0             # a Python __mul__: recursed into by the context
    return v.a * x + (x * 1j).imag


def sp_make(c):
    def f(x):
        return c * x ** 2 + c
    return f


def sp_divide(x):
    y = x * 2.0
    return y / (x - x)


def sp_power_edges(x):
    return (x - x) ** 0.5 + x ** 2


def assert_specialised(fun, *args, argnums=0):
    """``grad(fun, argnums)(*args)`` runs ``fun``'s specialised version (the reverse-specialised
    route, on the default routes whatever route the run forces); returns the gradient."""
    with testing.force_route(None):
        report = explain(functools.partial(grad, argnums=argnums), fun, *args)
    assert "reverse-specialised" in report.ran, str(report)
    return report.result


@pytest.mark.parametrize("fun, x", [
    (sp_rosenbrock, U(-1.0, 1.0, 6)),
    (sp_rk4, 1.0),
    (sp_control, 1.3),
    (sp_control, 0.4),
    (sp_mixed, U(-1.0, 1.0, 3)),
    (sp_objects, 0.7),
    (sp_make(1.7), -0.4),
])
def test_specialised_scalar_code_agrees_with_forward_mode(fun, x):
    assert_specialised(fun, x)
    if np.ndim(x):
        np.testing.assert_allclose(grad(fun)(x), jacfwd(fun)(x), rtol=1e-12)
        np.testing.assert_allclose(grad(fun)(x), fd(fun, x), rtol=1e-6)
    else:
        assert grad(fun)(x) == pytest.approx(derivative(fun)(x), rel=1e-12)
        assert grad(fun)(x) == pytest.approx(fd(fun, x, EPS), rel=1e-6)


def test_specialised_code_keeps_arguments_and_defaults():
    assert grad(sp_control)(1.3, b=1.0) == pytest.approx(derivative(
        lambda v: sp_control(v, b=1.0))(1.3), rel=1e-12)
    assert grad(sp_control, argnums=(0, 1))(1.3, 0.5)[1] == pytest.approx(
        derivative(lambda a: sp_control(1.3, a))(0.5), rel=1e-12)


@pytest.mark.default_routes
def test_specialised_code_records_one_entry_per_expression():
    x = U(-1.0, 1.0, 6)
    tape = overdub_ad.reverse._sweep._forward(sp_rosenbrock, (x,), {}, (0,), enclosed=False)[0]
    # per step: three reads of x and one entry for the whole sum (not one per operator)
    assert len(tape) == 4 * 5


def test_specialised_code_raises_where_the_user_wrote_it():
    with pytest.raises(ZeroDivisionError) as info:
        grad(sp_divide)(1.0)
    last = info.traceback[-1]
    assert str(last.path) == __file__
    assert "y / (x - x)" in str(last.statement)


def test_specialised_code_leaves_uncovered_points_to_the_rules():
    # (x - x) ** 0.5 has no finite partial at 0: the expression goes through the rules, as it
    # does on arrays (where the specialised expression never applies)
    expected = grad(lambda v: np.sum(sp_power_edges(v)))(np.array([2.0]))[0]
    np.testing.assert_equal(grad(sp_power_edges)(2.0), expected)


def test_specialised_code_is_not_used_under_an_enclosing_context():
    # forward over reverse and reverse over reverse see every operation
    assert hessian(sp_rk4)(1.0) == pytest.approx(jacfwd(jacfwd(sp_rk4))(1.0), rel=1e-8)
    assert grad(grad(sp_control))(1.3) == pytest.approx(
        derivative(derivative(sp_control))(1.3), rel=1e-10)
    counter = CountContext()
    overdub(counter, grad(sp_rk4), 1.0)
    assert counter.counts[operator.mul] >= 20 * 4   # the arithmetic reached the counting context


def test_hvp_on_the_tape_agrees_with_jvp_of_grad():
    def f(x):
        return np.sum(np.tanh(x) * np.exp(x / 3.0) + np.sin(x) ** 3 - np.log(x * x + 1.0)
                      + np.sqrt(x * x + 2.0) * np.cos(x)) + x[0] ** x[1]
    x, v = U(0.5, 1.5, 5), R(5)
    np.testing.assert_allclose(hvp(f, x, v), jvp(grad(f), (x,), (v,))[1], rtol=1e-12)
    np.testing.assert_allclose(hvp(f, x, v), hessian(f)(x) @ v, rtol=1e-10)
    m = R(5, 5)

    def g(x):
        y = np.zeros(6)
        y[1:] = m @ x
        y[0] += x[2] ** 2
        return np.sum(y * y) + np.max(x) + np.linalg.norm(x)
    np.testing.assert_allclose(hvp(g, x, v), jvp(grad(g), (x,), (v,))[1], rtol=1e-12)
    assert hvp(sp_rk4, 1.0, 2.0) == pytest.approx(2.0 * hessian(sp_rk4)(1.0), rel=1e-10)


    def k(x):  # several outputs: a tuple (split), a named tuple (qr, eigh)
        a, b = np.split(x[:4] ** 2, 2)
        q, r = np.linalg.qr(np.outer(x[:3], x[2:]) + np.eye(3))
        w, _ = np.linalg.eigh(np.outer(x[:3], x[:3]) + np.diag(x[2:]))
        return np.sum(a * b ** 2) + np.sum(r ** 2) + np.sum(w ** 2)
    np.testing.assert_allclose(hvp(k, x[:5], v[:5]), jvp(grad(k), (x[:5],), (v[:5],))[1],
                               rtol=1e-10)
    with pytest.raises(ValueError, match="direction of shape"):
        hvp(f, x, v[:2])
    with pytest.raises(TypeError, match="scalar output"):
        hvp(np.sin, x, v)

    def h(z):  # complex arguments and directions: the convention of jvp(grad(f))
        return np.sum(np.abs(z) ** 2 * np.real(z) + np.real(np.sin(z) * z ** 2))
    z, w = Cx(4), Cx(4)
    np.testing.assert_allclose(hvp(h, z, w), jvp(grad(h), (z,), (w,))[1], rtol=1e-12)


def _random_expression(rng, depth):
    if depth == 0 or rng.random() < 0.25:
        return str(rng.choice(["a", "b", "a", "b", "2.0", "0.5", "3", "1.5"]))
    kind = rng.integers(0, 7)
    left = _random_expression(rng, depth - 1)
    if kind == 5:
        return f"-({left})"
    if kind == 6:
        return f"({left}) ** {rng.choice(['2', '3', '0.5', '-1', '1'])}"
    right = _random_expression(rng, depth - 1)
    return f"({left}) {'+-*/*'[kind]} ({right})"


@pytest.mark.default_routes
def test_specialised_expressions_agree_with_the_operation_by_operation_tape(tmp_path):
    """Random arithmetic: gradients (or the exception raised) of the specialised code equal
    those of the general path (under an enclosing context nothing is specialised)."""
    rng = np.random.default_rng(11)   # the corpus of 40 programs the tolerances were set for
    lines = [f"def f{k}(a, b):\n    c = {_random_expression(rng, 4)}\n"
             f"    c += {_random_expression(rng, 3)}\n    return c * a\n" for k in range(40)]
    path = tmp_path / "sp_random_module.py"
    path.write_text("\n\n".join(lines), encoding="utf-8")
    import importlib.util
    spec = importlib.util.spec_from_file_location("sp_random_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for k in range(40):
        fun = getattr(module, f"f{k}")
        for a, b in ((0.7, 1.3), (-1.2, 0.4), (2.0, 0.0), (0.0, -0.5), (1.0, 1.0)):
            general = special = None
            try:
                general = overdub(Context(), grad(fun, (0, 1)), a, b)
            except Exception as error:  # the specialised code must raise the same
                general = type(error)
            try:
                special = assert_specialised(fun, a, b, argnums=(0, 1))
            except AssertionError:
                raise
            except Exception as error:
                special = type(error)
            if isinstance(general, type):
                assert special is general, (lines[k], a, b)
            else:
                np.testing.assert_allclose(special, general, rtol=1e-12, atol=1e-300,
                                           err_msg=lines[k])


def sp_statements(x, scale):
    out = np.zeros(3)
    out[0] = x
    out[0] += x * scale         # an item updated in place
    out[1:] += 2.0
    box = SpVec(x)
    box.a *= scale              # an attribute too
    return out[0] * box.a + np.sum(out)


def test_specialised_statements():
    assert_specialised(sp_statements, 0.8, 1.5)
    assert grad(sp_statements)(0.8, 1.5) == pytest.approx(derivative(
        lambda v: sp_statements(v, 1.5))(0.8), rel=1e-12)
    assert grad(sp_statements, 1)(0.8, 1.5) == pytest.approx(derivative(
        lambda s: sp_statements(0.8, s))(1.5), rel=1e-12)


def test_specialised_asserts(tmp_path):
    # (pytest rewrites the asserts of its test modules: the source would not match the code)
    path = tmp_path / "sp_assert_module.py"
    path.write_text("def f(x):\n    assert x * x > 0.5, 'too small'\n    return x ** 3\n",
                    encoding="utf-8")
    import importlib.util
    spec = importlib.util.spec_from_file_location("sp_assert_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert assert_specialised(module.f, 2.0) == 12.0
    assert grad(module.f)(2.0) == 12.0
    with pytest.raises(AssertionError, match="too small"):
        grad(module.f)(0.5)
