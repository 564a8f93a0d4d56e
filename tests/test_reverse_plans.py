"""Reverse mode's fast path for array code (issue #5): the plans it keeps per function, the
faster equivalents of shipped rules it records, the sweep's sums over broadcast axes, and the
pytrees of arguments and gradients.

Each shortcut is checked against the general path it stands in for (the shipped rule, the
general ``_unbroadcast``, the round trip of a pytree) and the gradients it gives against
finite differences and forward mode.  Every function under test is defined in this file:
overdub rewrites functions from their source.
"""

from __future__ import annotations

import operator
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from overdub_ad import _reverse, _rules, check_grads, defvjp, grad, hvp, jacfwd, jacrev, vjp
from overdub_ad._pytree import flatten, unflatten

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_reverse import mlp_backprop  # noqa: E402  (the hand-written reference)

RNG = np.random.default_rng(11)


def sum_of_sines(x):
    return np.sum(np.sin(x))


def mlp_loss(params, x, y):
    h = x
    for w, b in params:
        h = np.tanh(h @ w + b)
    return 0.5 * np.sum((h - y) ** 2)


def _mlp(width=5, layers=3, batch=4):
    params = [(RNG.standard_normal((width, width)) / np.sqrt(width), RNG.standard_normal(width))
              for _ in range(layers)]
    return params, RNG.standard_normal((batch, width)), RNG.standard_normal((batch, width))


# -- plans follow the rule tables ------------------------------------------------------------

@pytest.fixture
def sin_rules():
    """np.sin's shipped reverse rules, put back after the test: the very tuple restored (the
    engine's tables of shipped rules compare its identity), and announced so that plans are
    made again."""
    shipped = _rules.vjp_rules(np.sin)
    yield shipped
    _rules._TABLE[id(np.sin)].vjps = shipped
    _rules._changed()
    assert _rules.vjp_rules(np.sin) is shipped


def test_a_rule_registered_between_calls_is_used_by_the_next_call(sin_rules):
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))
    version = _rules.version
    defvjp(np.sin, lambda ct, out, x: 3.0 * ct)
    assert _rules.version > version
    np.testing.assert_array_equal(grad(sum_of_sines)(x), np.full(3, 3.0))
    defvjp(np.sin, *sin_rules)
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))


def test_plans_follow_rule_tables_swapped_and_announced(monkeypatch):
    x = np.array([0.5, 1.5])
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))
    entry = _rules._Entry(np.sin)
    entry.vjps = (lambda ct, out, x: -2.0 * ct,)
    table = dict(_rules._TABLE)
    table[id(np.sin)] = entry
    monkeypatch.setattr(_rules, "_TABLE", table)  # as the tests' isolated_rules fixtures do
    _rules._changed()
    np.testing.assert_array_equal(grad(sum_of_sines)(x), np.full(2, -2.0))
    monkeypatch.undo()
    _rules._changed()
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))


def test_a_nondifferentiable_declaration_between_calls_is_seen(monkeypatch):
    monkeypatch.setattr(_rules, "_NONDIFFERENTIABLE", dict(_rules._NONDIFFERENTIABLE))
    monkeypatch.setattr(_rules, "_TABLE", dict(_rules._TABLE))
    x = np.array([0.2, 0.7])
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))
    _rules.nondifferentiable(np.sin)  # (a new entry in the patched copy only)
    np.testing.assert_array_equal(grad(sum_of_sines)(x), np.zeros(2))
    monkeypatch.undo()
    _rules._changed()  # the copy swapped back
    np.testing.assert_allclose(grad(sum_of_sines)(x), np.cos(x))


# -- faster equivalents of shipped rules -------------------------------------------------------

@pytest.mark.parametrize("fn", [operator.matmul, np.matmul])
def test_matrix_product_rules_give_the_shipped_rules_numbers(fn):
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    ct = RNG.standard_normal((3, 2))
    shipped = _rules.vjp_rules(fn)
    test, quick = _reverse._QUICK[id(fn)][2:4]
    assert test(3, [x, y], {})
    assert not test(3, [x, y[:, 0]], {}) and not test(3, [np.stack([x, x]), y], {})
    assert not test(3, [x, y], {"dtype": float})
    for i in (0, 1):
        np.testing.assert_array_equal(quick[i](ct, x @ y, x, y), shipped[i](ct, x @ y, x, y))


@pytest.mark.parametrize("ct", [1.5, np.float32(2.0), 0.5 - 2j, np.array(3.0)])
@pytest.mark.parametrize("shape", [(2, 3), (4,), (), (0, 2)])
def test_whole_sum_rule_gives_the_shipped_rules_view(ct, shape):
    x = np.ones(shape)
    expected = _rules.vjp_rules(np.sum)[0](ct, np.sum(x), x)
    got = _reverse._sum_all_vjp(ct, np.sum(x), x)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert not got.flags.writeable and not expected.flags.writeable
    np.testing.assert_array_equal(got, expected)


def test_whole_sum_rule_is_only_for_a_lone_array():
    test = _reverse._QUICK[id(np.sum)][2]
    x = np.ones((2, 3))
    assert test(1, [x], {})
    assert not test(1, [x, 0], {}) and not test(1, [x], {"axis": 0}) and not test(1, [2.0], {})


def test_constant_powers_keep_their_shortcut_for_second_order_tapes():
    quick_rules = {entry[3]: entry[4] for entry in _reverse._QUICK.values()}
    assert quick_rules[_reverse._POW_CONSTANT] is True  # _hvp differentiates it
    assert not any(second for rules, second in quick_rules.items()
                   if rules is not _reverse._POW_CONSTANT)


def test_mlp_gradient_matches_hand_written_backprop_and_finite_differences():
    params, x, y = _mlp()
    ours = grad(mlp_loss)(params, x, y)
    hand = mlp_backprop(params, x, y)
    assert type(ours) is list and all(type(layer) is tuple for layer in ours)
    for (gw, gb), (hw, hb) in zip(ours, hand):
        np.testing.assert_allclose(gw, hw, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gb, hb, rtol=1e-12, atol=1e-14)
        assert gw.flags.writeable and gb.flags.writeable
    check_grads(lambda w: mlp_loss([(w, params[0][1])] + params[1:], x, y), (params[0][0],),
                modes=("rev",))


def test_mlp_hessian_vector_product_agrees_with_forward_over_reverse():
    params, x, y = _mlp(width=3, layers=2, batch=2)
    w, b = params[0]
    v = RNG.standard_normal(w.shape)

    def loss_of_w(w):
        return mlp_loss([(w, b)] + params[1:], x, y)

    expected = np.tensordot(jacfwd(grad(loss_of_w))(w), v, axes=2)
    np.testing.assert_allclose(hvp(loss_of_w, w, v), expected, rtol=1e-10, atol=1e-12)


def matrix_chain(a, b, c):
    return np.sum(np.tanh(a @ b) @ c)


def test_matrix_products_and_sums_agree_with_forward_mode():
    a, b, c = (RNG.standard_normal(s) for s in ((3, 4), (4, 5), (5, 2)))
    for argnum in (0, 1, 2):
        rev = jacrev(matrix_chain, argnum)(a, b, c)
        fwd = jacfwd(matrix_chain, argnum)(a, b, c)
        np.testing.assert_allclose(rev, fwd, rtol=1e-12, atol=1e-14)


# -- the sweep's sums over broadcast axes ------------------------------------------------------

_SHAPES = st.sampled_from([((2, 3), (3,)), ((4, 2, 3), (3,)), ((4, 2, 3), (2, 3)),
                           ((2, 3), (1, 3)), ((2, 3), (2, 1)), ((5,), ()), ((2, 3), (2, 3))])


@settings(max_examples=25, deadline=None)
@given(_SHAPES, st.booleans(), st.integers(0, 2**31 - 1))
def test_summed_equals_unbroadcast(shapes, complex_ct, seed):
    ct_shape, x_shape = shapes
    rng = np.random.default_rng(seed)
    ct = rng.standard_normal(ct_shape)
    if complex_ct:
        ct = ct + 1j * rng.standard_normal(ct_shape)
    x = np.zeros(x_shape)
    got, expected = _reverse._summed(ct, x), _reverse._unbroadcast(ct, x)
    assert np.shape(got) == np.shape(expected) == x_shape
    assert np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(got, expected)


def bias_added(x, b):
    return np.sum(np.sin(x + b) * x)


def test_bias_gradient_sums_over_the_batch():
    x, b = RNG.standard_normal((6, 3)), RNG.standard_normal(3)
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
    if type(a) in (list, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if type(a) is dict:
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a is b


@settings(max_examples=25, deadline=None)
@given(_TREES)
def test_pytree_round_trip(tree):
    leaves, treedef = flatten(tree)
    assert _same(unflatten(treedef, leaves), tree)
    again, treedef_again = flatten(unflatten(treedef, leaves))
    assert treedef_again == treedef and all(a is b for a, b in zip(again, leaves))


def dict_loss(p):
    return np.sum(p["w"] ** 2) + p["nested"][0] * np.sum(p["nested"][1])


def test_gradients_keep_the_arguments_pytree():
    p = {"w": RNG.standard_normal(3), "nested": [2.0, (RNG.standard_normal(2))]}
    g = grad(dict_loss)(p)
    assert list(g) == ["w", "nested"] and type(g["nested"]) is list
    np.testing.assert_allclose(g["w"], 2 * p["w"])
    assert type(g["nested"][0]) is float and g["nested"][0] == pytest.approx(np.sum(p["nested"][1]))
    np.testing.assert_allclose(g["nested"][1], np.full(2, 2.0))
