"""Reverse-mode derivatives an outside tester found silently wrong or refused, and their
kin found while mending them (issue #14's class).

- Values the tape holds are kept as the forward pass used them: the inputs of a
  ``checkpoint`` (a state buffer written in place by the very call, ``h[:] =
  checkpoint(layer)(h, w)``), what a ``custom_vjp``'s ``fwd`` keeps, an array given by keyword;
  and everything ``vjp``'s pullback reads, written by the caller before the pullback is
  called (the primal, the output, an array from outside).
- Containers other than a list or dict themselves -- subclasses, ``deque``, ``OrderedDict``,
  ``defaultdict``, named tuples, ``dict.fromkeys``, ``heapq.nsmallest`` -- and stores spelled
  as calls of C methods (``list.append(l, x)``, ``dict.__setitem__``, ``super().__setitem__``,
  ``a.__setitem__``, ``a.__iadd__``) are differentiated in both modes, and second order; the
  containers hold plain values again once the derivative returns.

Each against finite differences and the other mode, on first and repeated calls.  Every
function under test is defined here: overdub rewrites functions from their source.
"""

from __future__ import annotations

import collections
import heapq
import math

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import checkpoint, custom_vjp, grad, vjp
from tests.conftest import fd

# -- checkpoint and custom_vjp keep the inputs they were called with -------------------------


def _layer(h, w):
    return np.tanh(w * h)


def _buffered(w, wrap):
    h = np.linspace(0.1, 1.0, 3)
    for _ in range(3):
        h[:] = wrap(_layer)(h, w)   # the state buffer overwritten by the call's own result
    return np.sum(h)


def _checkpointed_buffer(w):
    return _buffered(w, checkpoint)


def _plain_buffer(w):
    return _buffered(w, lambda f: f)


def test_checkpoint_recomputes_from_inputs_as_they_were_at_the_call():
    for w in (0.9, -0.4, 0.9):  # first and repeated calls
        want = fd(_plain_buffer, w)
        assert grad(_checkpointed_buffer)(w) == pytest.approx(want, rel=1e-7)
        assert grad(_checkpointed_buffer)(w) == pytest.approx(grad(_plain_buffer)(w), rel=1e-13)
        assert ad.derivative(_checkpointed_buffer, w) == pytest.approx(want, rel=1e-7)
    assert grad(_checkpointed_buffer)(0.9) == pytest.approx(2.1491066178314755, rel=1e-12)


def test_checkpoint_with_a_rewritten_buffer_has_the_plain_second_derivative():
    for w in (0.9, 0.3):
        want = fd(grad(_plain_buffer), w)
        assert ad.hessian(_checkpointed_buffer)(w) == pytest.approx(want, rel=1e-6)
        assert grad(grad(_checkpointed_buffer))(w) == pytest.approx(want, rel=1e-6)


@custom_vjp
def _sum_of_squares(x):
    return np.sum(x ** 2)


def _sum_of_squares_fwd(x):
    return _sum_of_squares(x), x   # the residual is the argument itself


def _sum_of_squares_bwd(x, ct):
    return (2.0 * x * ct,)


_sum_of_squares.defvjp(_sum_of_squares_fwd, _sum_of_squares_bwd)


def _residual_overwritten(x):
    h = x * 1.0
    s = _sum_of_squares(h)
    h[:] = 0.0   # the array fwd kept for bwd, written after the call
    return s


def _clip_bound_overwritten(x):
    low = np.full(3, 0.5)
    s = np.sum(np.clip(x, a_min=low, a_max=None) ** 2)   # the rule reads low (by keyword)
    low[:] = 5.0
    return s


def test_a_custom_vjp_residual_written_later_keeps_its_value():
    for x in (np.array([0.2, 0.7, 1.0]), np.array([-1.0, 0.5, 2.0])):
        assert np.allclose(grad(_residual_overwritten)(x), 2.0 * x, rtol=1e-14)
        assert np.allclose(grad(_residual_overwritten)(x), fd(_residual_overwritten, x),
                           rtol=1e-7)


def test_an_array_given_by_keyword_and_written_later_keeps_its_value():
    for x in (np.array([0.2, 0.7, 1.0]), np.array([0.6, 0.1, 2.0])):
        want = fd(_clip_bound_overwritten, x)
        assert np.allclose(grad(_clip_bound_overwritten)(x), want, rtol=1e-7, atol=1e-9)
        assert np.allclose(ad.jacfwd(_clip_bound_overwritten)(x), want, rtol=1e-7, atol=1e-9)


# -- vjp's pullback uses the values of the forward pass ---------------------------------------


def _cubes(a):
    return np.sum(a ** 3)


def test_a_pullback_ignores_a_later_write_into_the_primal():
    x = np.array([1.0, 2.0])
    out, pullback = vjp(_cubes, x)
    x[:] = 3.0   # an optimiser's step, in place
    assert np.array_equal(pullback(1.0)[0], [3.0, 12.0])
    assert np.array_equal(pullback(2.0)[0], [6.0, 24.0])   # again
    assert out == 9.0 and np.array_equal(x, [3.0, 3.0])     # the caller's array is its own


def test_a_pullback_ignores_a_later_write_into_the_output():
    x = np.array([0.5, -1.0, 2.0])
    out, pullback = vjp(np.exp, x)
    want = np.exp(x) * [1.0, 2.0, 3.0]
    out *= 0.0
    for _ in range(2):
        assert np.allclose(pullback(np.array([1.0, 2.0, 3.0]))[0], want, rtol=1e-15)


_DATA = np.array([[1.0, 2.0], [3.0, -4.0]])


def _through_outside_data(w):
    return np.sum(np.sin(_DATA @ w))


def test_a_pullback_ignores_a_later_write_into_an_array_from_outside():
    w = np.array([0.3, -0.2])
    want = fd(_through_outside_data, w)
    _, pullback = vjp(_through_outside_data, w)
    saved = _DATA.copy()
    try:
        _DATA[:] = 7.0
        assert np.allclose(pullback(1.0)[0], want, rtol=1e-8)
        assert np.allclose(pullback(1.0)[0], want, rtol=1e-8)
    finally:
        _DATA[:] = saved


def _checkpointed_cubes(a):
    return np.sum(checkpoint(lambda b: b ** 3)(a))


def test_a_pullback_through_checkpoint_ignores_a_later_write_into_the_primal():
    x = np.array([1.0, 2.0])
    _, pullback = vjp(_checkpointed_cubes, x)
    x[:] = 3.0
    assert np.array_equal(pullback(1.0)[0], [3.0, 12.0])


def _pullback_then_write(x):
    y = x * 1.0
    _, pullback = vjp(_cubes, y)
    y[:] = 0.0   # under the outer derivative: a write it sees
    return np.sum(pullback(1.0)[0])


def test_a_pullback_under_an_enclosing_derivative_ignores_a_later_write():
    for x in (np.array([1.0, 2.0]), np.array([-0.5, 3.0])):
        assert np.allclose(grad(_pullback_then_write)(x), 6.0 * x, rtol=1e-14)
        assert np.allclose(ad.jacfwd(_pullback_then_write)(x), 6.0 * x, rtol=1e-14)


_WEIGHTS = (np.array([1.0, -2.0, 0.5]), np.array([3.0, 0.25, -1.0]))


def _weighted_pullback(x, y):
    _, pullback = vjp(lambda p, q: p * q, x, y)
    gx, gy = pullback(np.ones(3))   # (y, x)
    return np.sum(gx * _WEIGHTS[0] + gy * _WEIGHTS[1])


def test_a_pullback_keeps_each_argument_apart_when_one_array_is_given_twice():
    x = np.array([0.3, -1.2, 2.0])
    for _ in range(2):
        dx, dy = grad(_weighted_pullback, argnums=(0, 1))(x, x)   # the same array twice
        assert np.array_equal(dx, _WEIGHTS[1]) and np.array_equal(dy, _WEIGHTS[0])
        dx, dy = ad.jacfwd(_weighted_pullback, argnums=(0, 1))(x, x)
        assert np.array_equal(dx, _WEIGHTS[1]) and np.array_equal(dy, _WEIGHTS[0])


def test_grad_and_vjp_agree_after_the_copies():
    rng = np.random.default_rng(3)
    params = [(rng.standard_normal((4, 4)), rng.standard_normal(4)) for _ in range(3)]
    x = rng.standard_normal((5, 4))

    def loss(params):
        h = x
        for w, b in params:
            h = np.tanh(h @ w + b)
        return np.sum(h ** 2)

    _, pullback = vjp(loss, params)
    g = grad(loss)(params)
    for w, b in params:
        w += 1.0   # the caller steps the parameters in place
        b -= 1.0
    pulled = pullback(1.0)[0]
    for (gw, gb), (pw, pb) in zip(g, pulled):
        assert np.array_equal(gw, pw) and np.array_equal(gb, pb)


# -- containers: subclasses, collections, named tuples, stores spelled as C method calls ------


class _List(list):
    pass


class _Dict(dict):
    pass


class _AttrDict(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


class _Doubling(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, 2.0 * value)


class _ListWithInit(list):
    def __init__(self, items):
        super().__init__(items)
        self.note = "made"


_Pair = collections.namedtuple("_Pair", "a b")


def _appended(container, x):
    container.append(x)
    return container


def _list_subclass_append(x):
    return _appended(_List(), x)[0] * x


def _unbound_list_append(x):
    items = []
    list.append(items, x)
    return items[0] * x


def _unbound_dict_setitem(x):
    d = {}
    dict.__setitem__(d, "a", x)
    return d["a"] * x


def _bound_setitems(x):
    items, d = [0.0], {}
    items.__setitem__(0, x)
    d.__setitem__("a", 2.0 * x)
    return items[0] * d["a"]


def _doubling_dict(x):
    d = _Doubling()
    d["w"] = x           # its own __setitem__, whose super().__setitem__ stores 2 x
    return d["w"] * x


def _attribute_dict(x):
    d = _AttrDict(w=x)
    d.v = 3.0 * x
    return d.w * d.v


def _plain_array_setitem(x):
    a = np.zeros(2)
    a.__setitem__(0, x)
    np.ndarray.__setitem__(a, 1, x * x)
    return np.sum(a) * x


def _differentiated_array_setitem(x):
    a = x * np.ones(3)
    a.__setitem__(0, 5.0)   # a constant over a differentiated element
    return np.sum(a * a)


def _held_array_iadd(x):
    a = np.ones(2)
    s = np.sum(np.sin(a * x) * a)   # the tape holds a
    a.__iadd__(1.0)                 # then it is written, spelled as a method call
    return s


def _deque_written(x):
    d = collections.deque([0.0, 0.0])
    d[0] = x
    d[1] = 2.0 * x
    d.append(x * x)
    d.appendleft(3.0)
    return np.sum(d) * x + sum(d)


def _ordered_dict_values(x):
    od = collections.OrderedDict()
    od["a"] = x
    od["b"] = 2.0 * x
    od.update(c=x * x)
    return sum(od.values()) * np.sum(list(od.values()))


def _defaultdict_values(x):
    counts = collections.defaultdict(float)
    counts["a"] += x
    counts["b"] += x * x
    return sum(counts.values()) * x


def _list_subclass_written(x):
    items = _List([0.0, 0.0])
    items[0] = x
    items[1] = 2.0 * x
    return np.sum(items) * x


def _list_subclass_with_init(x):
    items = _ListWithInit([x, 2.0 * x])
    return np.sum(items) * items[0]


def _differentiated_array_iadd(x):
    a = x * np.ones(2)
    a.__iadd__(x * x)
    return np.sum(a * a)


def _dict_values_summed(x):
    return sum(dict(a=x, b=2.0 * x).values()) * x


def _deque_of_array(x):
    rows = collections.deque(np.array([1.0, 2.0]) * x)
    return rows[1] * x


CONTAINER_CASES = {
    "list subclass": lambda x: _List([x])[0] * x,
    "list subclass append": _list_subclass_append,
    "dict subclass": lambda x: _Dict(w=x)["w"] * x,
    "attribute dict": _attribute_dict,
    "dict subclass calling super().__setitem__": _doubling_dict,
    "list.append(items, x)": _unbound_list_append,
    "dict.__setitem__(d, k, x)": _unbound_dict_setitem,
    "bound __setitem__ of a list and a dict": _bound_setitems,
    "array __setitem__, bound and unbound": _plain_array_setitem,
    "differentiated array's __setitem__": _differentiated_array_setitem,
    "held array's __iadd__": _held_array_iadd,
    "differentiated array's __iadd__": _differentiated_array_iadd,
    "dict values summed": _dict_values_summed,
    "dict.fromkeys": lambda x: dict.fromkeys("ab", x)["a"] * x,
    "deque": lambda x: collections.deque([x, 2.0])[0] * x,
    "OrderedDict": lambda x: collections.OrderedDict([("a", x)])["a"] * x,
    "heapq.nsmallest": lambda x: heapq.nsmallest(2, [x, 3.0 * x, 0.1])[1] * x,
    "deque written and read by NumPy": _deque_written,
    "OrderedDict values": _ordered_dict_values,
    "defaultdict values": _defaultdict_values,
    "list subclass written and read by NumPy": _list_subclass_written,
    "list subclass with __init__": _list_subclass_with_init,
    "deque of a differentiated array": _deque_of_array,
    "named tuple to np.sum": lambda x: np.sum(_Pair(x, 2.0 * x * x)),
    "named tuple to np.array": lambda x: np.array(_Pair(x, 2.0 * x * x))[1],
    "named tuple to math.fsum": lambda x: math.fsum(_Pair(x, 2.0 * x * x)),
    "deque to np.array": lambda x: np.array(collections.deque([x, 2.0 * x * x]))[1],
    "deque to math.fsum": lambda x: math.fsum(collections.deque([x, 2.0 * x * x])),
}


@pytest.mark.parametrize("f", CONTAINER_CASES.values(), ids=CONTAINER_CASES.keys())
def test_containers_are_differentiated_in_both_modes(f):
    for x in (1.5, -0.7, 1.5):  # first and repeated calls
        want = fd(f, x)
        assert grad(f)(x) == pytest.approx(want, rel=1e-7, abs=1e-9)
        assert ad.derivative(f, x) == pytest.approx(want, rel=1e-7, abs=1e-9)
        assert grad(f)(x) == pytest.approx(ad.derivative(f, x), rel=1e-13, abs=1e-14)


@pytest.mark.parametrize("f", CONTAINER_CASES.values(), ids=CONTAINER_CASES.keys())
def test_containers_have_second_derivatives(f):
    x = 1.3
    want = fd(lambda t: ad.derivative(f, t), x)
    assert ad.hessian(f)(x) == pytest.approx(want, rel=1e-6, abs=1e-8)
    assert grad(grad(f))(x) == pytest.approx(want, rel=1e-6, abs=1e-8)
    assert ad.derivative(grad(f), x) == pytest.approx(want, rel=1e-6, abs=1e-8)


def _fill_outside(stores, x):
    ordered, queue, items, counts, doubling = stores
    ordered["a"] = 2.0 * x
    ordered.update(b=x)
    queue.append(3.0 * x)
    items.append(4.0 * x)
    list.append(items, 5.0 * x)
    counts["k"] += x
    doubling["w"] = x
    return x * x + sum(ordered.values()) + doubling["w"]


def _outside_stores():
    return (collections.OrderedDict(), collections.deque(), _List(),
            collections.defaultdict(float), _Doubling())


def _assert_plain(stores, x):
    ordered, queue, items, counts, doubling = stores
    assert dict(ordered) == {"a": 2.0 * x, "b": x} and type(ordered["a"]) is float
    assert list(queue) == [3.0 * x] and type(queue[0]) is float
    assert list(items) == [4.0 * x, 5.0 * x] and all(type(v) is float for v in items)
    assert dict(counts) == {"k": x} and type(counts["k"]) is float
    assert dict(doubling) == {"w": 2.0 * x}   # (put back once, not doubled again)


def test_containers_from_outside_hold_plain_values_after_reverse_mode():
    for x in (1.5, 0.5):
        stores = _outside_stores()
        assert grad(lambda t: _fill_outside(stores, t))(x) == pytest.approx(2.0 * x + 5.0)
        _assert_plain(stores, x)


def test_containers_from_outside_hold_plain_values_after_forward_mode():
    for x in (1.5, 0.5):
        stores = _outside_stores()
        assert ad.derivative(lambda t: _fill_outside(stores, t), x) == pytest.approx(
            2.0 * x + 5.0)
        _assert_plain(stores, x)
