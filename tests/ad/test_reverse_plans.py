"""Reverse mode's fast path for array code (issue #5): the plans it keeps per function, the
faster equivalents of shipped rules it records, the sweep's sums over broadcast axes, and the
pytrees of arguments and gradients.

Each shortcut is checked through the public API against what it stands in for: the
``reverse-plans`` route (plans, and the faster rules for ``@``, ``np.matmul`` and ``np.sum``)
against the reference route, to the bit, also on the calls a faster rule must leave to the
shipped one; rules registered, swapped and restored between calls; the sums over broadcast
axes against forward mode; and the gradients against finite differences and forward mode.
Every function under test is defined in this file: overdub rewrites functions from their
source.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from overdub_ad import (check_grads, defvjp, explain, grad, hvp, jacfwd, jacrev, jvp,
                        nondifferentiable, vjp)
from overdub_ad.testing import REFERENCE, force_route, isolated_rules
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_reverse import mlp_backprop  # noqa: E402  (the hand-written reference)


def sum_of_sines(x):
    return np.sum(np.sin(x))


def mlp_loss(params, x, y):
    h = x
    for w, b in params:
        h = np.tanh(h @ w + b)
    return 0.5 * np.sum((h - y) ** 2)


def _mlp(rng, width=5, layers=3, batch=4):
    params = [(rng.standard_normal((width, width)) / np.sqrt(width), rng.standard_normal(width))
              for _ in range(layers)]
    return params, rng.standard_normal((batch, width)), rng.standard_normal((batch, width))


def _on_routes(fn, *args):
    """``fn(*args)`` on the reverse-plans route and on the reference route."""
    with force_route("reverse-plans"):
        fast = fn(*args)
    with force_route(REFERENCE):
        reference = fn(*args)
    return fast, reference


def _identical(fast, reference):
    """The same arrays: shape, dtype and every bit (the faster rules compute the very numbers
    of the shipped ones, not approximations)."""
    for a, b in zip(fast, reference):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


# -- plans follow the rule tables ------------------------------------------------------------

@pytest.mark.default_routes
def test_a_rule_registered_between_calls_is_used_by_the_next_call():
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))   # np.sin's plan made
    with isolated_rules():
        defvjp(np.sin, lambda ct, out, x: 3.0 * ct)
        np.testing.assert_array_equal(grad(sum_of_sines)(x), np.full(3, 3.0))
        defvjp(np.sin, lambda ct, out, x: 4.0 * ct)
        np.testing.assert_array_equal(grad(sum_of_sines)(x), np.full(3, 4.0))
    # the shipped rules back, and the plans with them: the reference route's numbers exactly
    _identical(_on_routes(grad(sum_of_sines), x), [np.cos(x), np.cos(x)])


@pytest.mark.default_routes
def test_plans_follow_rule_tables_restored_to_a_users_rule():
    x = np.array([0.5, 1.5])
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))
    with isolated_rules():
        defvjp(np.sin, lambda ct, out, x: -2.0 * ct)
        np.testing.assert_array_equal(grad(sum_of_sines)(x), np.full(2, -2.0))
        with isolated_rules():
            defvjp(np.sin, lambda ct, out, x: 5.0 * ct)
            np.testing.assert_array_equal(grad(sum_of_sines)(x), np.full(2, 5.0))
        # the tables put back to the outer block's rule (not the shipped one): plans follow
        np.testing.assert_array_equal(grad(sum_of_sines)(x), np.full(2, -2.0))
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))


@pytest.mark.default_routes
def test_a_nondifferentiable_declaration_between_calls_is_seen():
    x = np.array([0.2, 0.7])
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))
    with isolated_rules():
        nondifferentiable(np.sin)
        np.testing.assert_array_equal(grad(sum_of_sines)(x), np.zeros(2))
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))


# -- faster equivalents of shipped rules -------------------------------------------------------

def matrix_product(x, y):
    return np.sum(np.sin(x @ y))


def matmul_call(x, y):
    return np.sum(np.sin(np.matmul(x, y)))


def matmul_with_dtype(x, y):
    return np.sum(np.sin(np.matmul(x, y, dtype=float)))


@pytest.mark.parametrize("f", [matrix_product, matmul_call, matmul_with_dtype])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)),      # two matrices: the faster rules
                                    ((3, 4), (4,)),        # a vector, a stack: the shipped
                                    ((2, 3, 4), (4, 2))],  # rules (the faster ones would
                         ids=["matrices", "vector", "stack"])  # transpose the wrong axes)
def test_matrix_product_rules_give_the_shipped_rules_numbers(f, shapes, rng):
    x, y = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    fast, reference = _on_routes(grad(f, (0, 1)), x, y)
    _identical(fast, reference)
    for argnum in (0, 1):
        np.testing.assert_allclose(fast[argnum], jacfwd(f, argnum)(x, y), rtol=1e-12,
                                   atol=1e-14)


def total(x):
    return np.sum(x)


@pytest.mark.parametrize("ct", [1.5, np.float32(2.0), np.array(3.0)])  # (a complex one for
@pytest.mark.parametrize("shape", [(2, 3), (4,), (), (0, 2)])  # this real output: ValueError,
def test_whole_sum_rule_gives_the_shipped_rules_numbers(ct, shape):  # as in JAX)
    x = np.ones(shape)

    def pulled_back(x):
        return vjp(total, x)[1](ct)

    fast, reference = _on_routes(pulled_back, x)
    _identical(fast, reference)
    assert fast[0].shape == x.shape and fast[0].dtype == x.dtype
    np.testing.assert_array_equal(fast[0], np.full(shape, ct))
    assert fast[0].flags.writeable                                  # the user's own array


def sum_along(x):
    return np.sum(np.sin(x), 0) @ np.arange(1.0, 4.0)


def sum_with_axis(x):
    return np.sum(np.sin(np.sum(x, axis=0)))


def sum_of_a_number(x):
    return np.sum(2.0 * np.sum(x[0, 0]))


@pytest.mark.parametrize("f", [sum_along, sum_with_axis, sum_of_a_number])
def test_whole_sum_rule_is_only_for_a_lone_array(f, rng):
    x = rng.standard_normal((2, 3))
    fast, reference = _on_routes(grad(f), x)
    _identical([fast], [reference])
    np.testing.assert_allclose(fast, jacfwd(f)(x), rtol=1e-12, atol=1e-14)


def powers_in_a_loop(x, m):
    y = x
    for _ in range(2):   # a loop: outside hvp-compiled's straight-line subset, for hvp-tape
        y = np.tanh(m @ y) ** 2 + y ** 3 + np.sqrt(1.0 + y ** 2) + y ** 0.5 * 0.0
    return np.sum(y ** 2) + np.sum(x) ** 2


@pytest.mark.default_routes
def test_second_order_tapes_differentiate_the_shortcuts_they_record(rng):
    """Second-order tapes (hvp-tape) record the faster rule of a constant power, which the
    Hessian-vector product differentiates, and the shipped rules of ``@`` and ``np.sum``."""
    m = rng.standard_normal((4, 4))
    x, v = rng.uniform(0.1, 0.4, 4), rng.standard_normal(4)
    report = explain(hvp, lambda z: powers_in_a_loop(z, m), x, v)
    assert report.ran[-1] == "hvp-tape", str(report)
    with force_route(REFERENCE):
        reference = hvp(lambda z: powers_in_a_loop(z, m), x, v)
    np.testing.assert_allclose(report.result, reference, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(report.result,
                               jacfwd(grad(lambda z: powers_in_a_loop(z, m)))(x) @ v,
                               rtol=1e-10, atol=1e-12)


def test_mlp_gradient_matches_hand_written_backprop_and_finite_differences(rng):
    params, x, y = _mlp(rng)
    ours = grad(mlp_loss)(params, x, y)
    hand = mlp_backprop(params, x, y)
    assert type(ours) is list and all(type(layer) is tuple for layer in ours)
    for (gw, gb), (hw, hb) in zip(ours, hand):
        np.testing.assert_allclose(gw, hw, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gb, hb, rtol=1e-12, atol=1e-14)
        assert gw.flags.writeable and gb.flags.writeable
    check_grads(lambda w: mlp_loss([(w, params[0][1])] + params[1:], x, y), (params[0][0],),
                modes=("rev",))


def test_mlp_hessian_vector_product_agrees_with_forward_over_reverse(rng):
    params, x, y = _mlp(rng, width=3, layers=2, batch=2)
    w, b = params[0]
    v = rng.standard_normal(w.shape)

    def loss_of_w(w):
        return mlp_loss([(w, b)] + params[1:], x, y)

    expected = np.tensordot(jacfwd(grad(loss_of_w))(w), v, axes=2)
    np.testing.assert_allclose(hvp(loss_of_w, w, v), expected, rtol=1e-10, atol=1e-12)


def matrix_chain(a, b, c):
    return np.sum(np.tanh(a @ b) @ c)


def test_matrix_products_and_sums_agree_with_forward_mode(rng):
    a, b, c = (rng.standard_normal(s) for s in ((3, 4), (4, 5), (5, 2)))
    for argnum in (0, 1, 2):
        rev = jacrev(matrix_chain, argnum)(a, b, c)
        fwd = jacfwd(matrix_chain, argnum)(a, b, c)
        np.testing.assert_allclose(rev, fwd, rtol=1e-12, atol=1e-14)


# -- the sweep's sums over broadcast axes ------------------------------------------------------

_SHAPES = st.sampled_from([((2, 3), (3,)), ((4, 2, 3), (3,)), ((4, 2, 3), (2, 3)),
                           ((2, 3), (1, 3)), ((2, 3), (2, 1)), ((5,), ()), ((2, 3), (2, 3))])


def broadcast_sum(a, x):
    return a + x


@settings(max_examples=25, deadline=None)
@given(_SHAPES, st.booleans(), st.integers(0, 2**31 - 1))
def test_cotangents_are_summed_over_broadcast_axes(shapes, complex_ct, seed):
    """``x``'s cotangent in ``a + x``, ``x`` broadcast to ``a``'s shape: the cotangent summed
    over the broadcast axes (its real part, ``x`` being real, where ``a`` and the output are
    complex), as forward mode's Jacobian says."""
    ct_shape, x_shape = shapes
    rng = np.random.default_rng(seed)
    ct = rng.standard_normal(ct_shape)
    a, x = rng.standard_normal(ct_shape), rng.standard_normal(x_shape)
    if complex_ct:  # (a complex cotangent is one of a complex output: JAX refuses it for a
        ct = ct + 1j * rng.standard_normal(ct_shape)  # real one, and so does vjp)
        a = a + 1j * rng.standard_normal(ct_shape)
    got = vjp(broadcast_sum, a, x)[1](ct)[1]
    jacobian = jacfwd(broadcast_sum, 1)(a, x)               # ct_shape + x_shape
    expected = np.real(np.tensordot(ct, jacobian, axes=len(ct_shape)))
    assert np.shape(got) == x_shape and np.asarray(got).dtype == x.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-13)


def bias_added(x, b):
    return np.sum(np.sin(x + b) * x)


def test_bias_gradient_sums_over_the_batch(rng):
    x, b = rng.standard_normal((6, 3)), rng.standard_normal(3)
    gx, gb = grad(bias_added, (0, 1))(x, b)
    np.testing.assert_allclose(gb, np.sum(np.cos(x + b) * x, axis=0), rtol=1e-12)
    np.testing.assert_allclose(gx, np.sin(x + b) + np.cos(x + b) * x, rtol=1e-12)
    _, pullback = vjp(bias_added, x, b)
    np.testing.assert_allclose(pullback(2.0)[1], 2.0 * gb, rtol=1e-12)


# -- pytrees ------------------------------------------------------------------------------------

_LEAVES = st.one_of(st.floats(allow_nan=False), st.none(),
                    hnp.arrays(np.float64, st.integers(0, 3)))
_TREES = st.recursive(_LEAVES, lambda children: st.one_of(
    st.lists(children, max_size=3), st.lists(children, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=2), children, max_size=3)), max_leaves=8)


def _same(a, b):
    """The same tree: containers of the same types, keys in the same order, equal leaves."""
    if type(a) in (list, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if type(a) is dict:
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if a is None or b is None:
        return a is b
    return np.shape(a) == np.shape(b) and np.array_equal(a, b, equal_nan=True)


def identity(tree):
    return tree


@settings(max_examples=25, deadline=None)
@given(_TREES)
def test_pytree_round_trip(tree):
    """A pytree goes through the derivative APIs whole: flattened to its leaves and rebuilt,
    as the output of ``vjp`` and ``jvp`` and as the cotangent ``vjp`` hands back."""
    out, pullback = vjp(identity, tree)
    assert _same(out, tree)
    (back,) = pullback(out)
    assert _same(back, tree)
    primal, tangent = jvp(identity, (tree,), (tree,))
    assert _same(primal, tree) and _same(tangent, tree)


def dict_loss(p):
    return np.sum(p["w"] ** 2) + p["nested"][0] * np.sum(p["nested"][1])


def test_gradients_keep_the_arguments_pytree(rng):
    p = {"w": rng.standard_normal(3), "nested": [2.0, (rng.standard_normal(2))]}
    g = grad(dict_loss)(p)
    assert list(g) == ["w", "nested"] and type(g["nested"]) is list
    np.testing.assert_allclose(g["w"], 2 * p["w"])
    assert type(g["nested"][0]) is float and g["nested"][0] == pytest.approx(np.sum(p["nested"][1]))
    np.testing.assert_allclose(g["nested"][1], np.full(2, 2.0))
