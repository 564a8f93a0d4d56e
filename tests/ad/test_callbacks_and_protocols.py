"""Python code that C code calls: callables stored in containers and called later, callbacks
run by C functions during the call (defaultdict's factory, SciPy's solvers), special methods
that builtins call from C (``float(obj)``, ``pow(obj, 3)``, ``np.asarray(obj)``), C objects
that hold differentiated values (``functools.partial``, ``types.SimpleNamespace``), NumPy's
random samplers and strided views.  Each derivative is checked against central finite
differences in forward and reverse mode, on a first and a repeated call; what has no rule must
raise, never give a silent zero."""

from __future__ import annotations

import collections
import functools
import math
import types

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import MissingRuleError
from tests.conftest import fd

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def both_modes(f, x, rtol=1e-5, atol=1e-7):
    """``f``'s derivative at ``x`` in reverse (grad/jacrev) and forward (derivative/jacfwd)
    mode against finite differences, each twice (a first and a repeated call)."""
    want = fd(f, x)
    assert np.any(want != 0), "a test point with a nonzero derivative"
    reverse = ad.grad(f) if np.ndim(f(x)) == 0 else ad.jacrev(f)
    forward = ad.derivative(f) if np.ndim(x) == 0 else ad.jacfwd(f)
    for _ in range(2):
        np.testing.assert_allclose(reverse(x), want, rtol=rtol, atol=atol)
        np.testing.assert_allclose(forward(x), want, rtol=rtol, atol=atol)


# -- F1: callables stored in containers are the user's own, called through the context ------

def square(v):
    return v * v


def stored_in_dict_lambda(x):
    d = {}
    d["sq"] = lambda v: v * v
    return d["sq"](x)


def stored_in_dict_def(x):
    d = {"sq": None}
    d["sq"] = square
    return d["sq"](x) + x


def stored_in_list_slot(x):
    fs = [None, None]
    fs[0] = square
    fs[1] = lambda v: math.sin(v)
    return fs[0](x) * fs[1](x)


class Layer:
    def __init__(self, w):
        self.w = w

    def forward(self, h):
        return np.tanh(self.w * h)


def bound_method_in_layer_dict(w):
    layers = {}
    layers["dense"] = Layer(w).forward
    return np.sum(layers["dense"](np.array([1.0, 0.5])))


def stored_via_setdefault_and_update(x):
    d = {}
    d.setdefault("a", square)
    d.update(b=lambda v: v ** 3)
    return d["a"](x) + d["b"](x)


def stored_in_attribute(x):
    ns = Layer(1.0)
    ns.f = square
    setattr(ns, "g", lambda v: 2 * v * v)
    return ns.f(x) + ns.g(x)


@pytest.mark.parametrize("f", [stored_in_dict_lambda, stored_in_dict_def, stored_in_list_slot,
                               bound_method_in_layer_dict, stored_via_setdefault_and_update,
                               stored_in_attribute])
def test_stored_callable_is_differentiated(f):
    both_modes(f, 0.7)


def test_stored_callable_is_what_the_user_stored():
    """Nothing the engines store in the user's data differs from what the user stored."""
    registry: dict[str, object] = {}
    slots: list[object] = [None]

    def f(x):
        registry["sq"] = square
        slots[0] = square
        return registry["sq"](x) + slots[0](x)

    for run in (ad.grad(f), ad.derivative(f), ad.jacrev(f), ad.jacfwd(f)):
        np.testing.assert_allclose(run(0.5), 2.0)
        assert registry["sq"] is square and slots[0] is square


@functools.singledispatch
def dispatched(x):
    return x * x


@dispatched.register
def _(x: int):
    return 3 * x


def test_singledispatch_unharmed_by_a_grad():
    """singledispatch caches its implementations in a dict: after a grad, it must still
    dispatch to the user's functions, and derivatives through it must stay right."""
    for _ in range(2):
        assert ad.grad(dispatched)(0.5) == pytest.approx(1.0)
        assert ad.derivative(dispatched)(0.5) == pytest.approx(1.0)
        assert ad.grad(dispatched)(3.0) == pytest.approx(6.0)
    assert dispatched.dispatch(float) is dispatched.registry[object]
    assert dispatched.dispatch(int).__name__ == "_"
    assert dispatched(2) == 6


def test_odeint_callback_read_from_a_dict():
    si = pytest.importorskip("scipy.integrate")
    ts = np.array([0.0, 0.5, 1.0])

    def f(k):
        rhs = {}
        rhs["decay"] = lambda y, t: -k * y
        return si.odeint(rhs["decay"], 1.0, ts)[-1, 0]

    both_modes(f, 0.8, rtol=1e-4, atol=1e-6)


def test_guard_still_catches_a_solver_callback_with_a_hidden_dependence():
    """SciPy's C solvers still run their callbacks through the guard: a value the callback
    reads from a dict (not closed over) raises, never a silent zero."""
    si = pytest.importorskip("scipy.integrate")
    for run in (ad.grad, ad.derivative):
        def f(k):
            box = {"k": k}
            return si.quad(lambda s: math.exp(-box["k"] * s), 0.0, 1.0)[0]
        with pytest.raises(MissingRuleError):
            run(f)(0.7)


# -- F10: callbacks C code or other threads run ------------------------------------------------

def defaultdict_factory(t):
    d = collections.defaultdict(lambda: t * t)
    return d["a"] + 2 * d["a"]


class Memo(dict):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def __missing__(self, key):
        return self.scale * key


def dict_missing(t):
    return Memo(t * t)[3.0]


def defaultdict_list(t):
    d = collections.defaultdict(list)
    d["a"].append(t)
    d["a"].append(t * t)
    return sum(d["a"])


def defaultdict_accumulate(t):
    d = collections.defaultdict(float)
    for k, v in (("a", t), ("b", t * t), ("a", 3 * t)):
        d[k] += v
    return d["a"] * d["b"]


@pytest.mark.parametrize("f", [defaultdict_factory, dict_missing, defaultdict_list,
                               defaultdict_accumulate])
def test_missing_key_callbacks(f):
    both_modes(f, 0.7)


def test_defaultdict_keeps_its_stored_value():
    seen = {}

    def f(t):
        d = collections.defaultdict(lambda: t * t)
        out = d["a"]
        seen["keys"] = list(d)
        return out

    both_modes(f, 0.7)
    assert seen["keys"] == ["a"]


def test_threads_raise_rather_than_drop_derivatives():
    import concurrent.futures
    import threading

    def pool(x):
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            return sum(ex.map(lambda v: v * v, [x, 2 * x]))

    def thread(x):
        out = []
        worker = threading.Thread(target=lambda: out.append(x * x))
        worker.start()
        worker.join()
        return out[0]

    started = concurrent.futures.ThreadPoolExecutor(2)
    list(started.map(abs, range(8)))  # its threads started before the derivative

    def started_pool(x):
        return sum(started.map(lambda v: v * v, [x, 2 * x]))

    for f in (pool, thread, started_pool):
        for run in (ad.grad, ad.derivative):
            with pytest.raises(MissingRuleError, match="thread"):
                run(f)(0.5)
    started.shutdown()


# -- F6: special methods builtins call from C --------------------------------------------------

class Num:
    def __init__(self, v):
        self.v = v

    def __float__(self):
        return self.v

    def __complex__(self):
        return complex(self.v, 0.0)

    def __pow__(self, p):
        return Num(self.v ** p)

    def __rpow__(self, b):
        return Num(b ** self.v)

    def __divmod__(self, other):
        return Num(self.v // other), Num(self.v % other)

    def __array__(self, dtype=None, copy=None):
        return np.array([self.v, 2.0 * self.v], dtype=dtype)


class FloatOnly:
    def __float__(self):
        return self.v


class Ufuncs:
    def __init__(self, v):
        self.v = v

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            return NotImplemented
        return Ufuncs(ufunc(*[i.v if isinstance(i, Ufuncs) else i for i in inputs], **kwargs))


def float_only(v):
    obj = FloatOnly()
    obj.v = v
    return obj


SPECIAL = {
    "float": lambda x: float(Num(x * x)),
    "math.sin": lambda x: math.sin(Num(x)),
    "math.atan2": lambda x: math.atan2(Num(x), 2.0) + math.hypot(1.0, Num(x)),
    "complex": lambda x: complex(Num(x * x)).real,
    "complex via __float__": lambda x: complex(float_only(x * x)).real,
    "pow": lambda x: pow(Num(x), 3).v,
    "rpow": lambda x: pow(2.0, Num(x)).v,
    "divmod": lambda x: divmod(Num(3 * x), 1.0)[1].v,
    "np.asarray": lambda x: np.sum(np.asarray(Num(x * x)) ** 2),
    "np.array": lambda x: np.sum(np.array(Num(x), dtype=float) * x),
    "__array_ufunc__": lambda x: np.sin(Ufuncs(x * x)).v + np.multiply(2.0, Ufuncs(x)).v,
}


@pytest.mark.parametrize("name", SPECIAL)
def test_special_methods_called_from_c(name):
    both_modes(SPECIAL[name], 0.7)


def test_special_methods_keep_their_native_results():
    assert float(Num(2.0)) == 2.0 and pow(Num(2.0), 2).v == 4.0
    for run in (ad.grad, ad.derivative):
        assert run(lambda x: float(Num(x)) + int(3.7))(0.5) == pytest.approx(1.0)

    class Bad:
        def __float__(self):
            return "no"

    with pytest.raises(TypeError, match="__float__"):
        ad.grad(lambda x: x + float(Bad()))(0.5)


# -- E2 / finding 13: C objects holding differentiated values --------------------------------

def scaled(s, t):
    return s * t * t


def layer(h, w=1.0):
    return np.tanh(w * h)


C_HOLDERS = {
    "partial positional": lambda t: functools.partial(scaled, 2 * t)(t),
    "partial keyword": lambda w: np.sum(functools.partial(layer, w=w)(np.array([0.3, 0.5]))),
    "partial of partial": lambda t: functools.partial(functools.partial(scaled, t), t)(),
    "SimpleNamespace": lambda x: types.SimpleNamespace(a=x * x, b=3.0).a,
    "SimpleNamespace attr": lambda x: (lambda n: (setattr(n, "b", x * 3), n.b + n.a)[1])(
        types.SimpleNamespace(a=x)),
}


@pytest.mark.parametrize("name", C_HOLDERS)
def test_c_objects_holding_differentiated_values(name):
    both_modes(C_HOLDERS[name], 0.7)


def test_simple_namespace_stores_plain_values():
    kept = []

    def f(x):
        ns = types.SimpleNamespace(a=x * x)
        kept.append(ns)
        return ns.a

    both_modes(f, 0.7)
    assert all(type(ns.a) is float for ns in kept)


# -- F8: random samplers, by reparametrisation --------------------------------------------------

SAMPLERS = {
    "normal loc": lambda m: np.random.default_rng(0).normal(m, 1.5),
    "normal scale": lambda s: np.random.default_rng(0).normal(0.3, s),
    "normal keywords": lambda s: np.random.default_rng(0).normal(loc=s, scale=s * s),
    "normal array": lambda m: np.sum(np.random.default_rng(0).normal(m * np.ones(3), m) ** 2),
    "normal size": lambda s: np.sum(np.random.default_rng(1).normal(1.0, s, size=4)),
    "uniform": lambda a: np.random.default_rng(0).uniform(a, 3 * a),
    "exponential": lambda s: np.random.default_rng(0).exponential(s * s),
    "laplace": lambda s: np.random.default_rng(0).laplace(s, s),
    "logistic": lambda s: np.random.default_rng(0).logistic(2 * s, s),
    "gumbel": lambda s: np.random.default_rng(0).gumbel(s, s),
    "legacy normal": lambda m: np.random.RandomState(0).normal(m, m * m),
    "legacy uniform": lambda a: np.random.RandomState(0).uniform(a, 2.0, size=2).sum(),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_random_samplers_reparametrised(name):
    both_modes(SAMPLERS[name], 0.7, rtol=1e-4)


def test_random_sampler_without_rule_raises():
    for run in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError, match="gamma"):
            run(lambda k: np.random.default_rng(0).gamma(k, 1.0))(0.7)
        with pytest.raises(MissingRuleError, match="poisson"):
            run(lambda k: np.random.default_rng(0).poisson(k) * k)(0.7)


# -- F7, F11: strided views, object arrays ------------------------------------------------------

X5 = np.array([0.3, -1.2, 2.5, 0.7, 1.1])


def test_sliding_window_view():
    from numpy.lib.stride_tricks import sliding_window_view

    both_modes(lambda x: np.sum(sliding_window_view(x, 3).mean(axis=-1) ** 2), X5)
    both_modes(lambda x: sliding_window_view(x.reshape(2, 3) ** 2, (2, 2)).sum(axis=(-1, -2)),
               np.arange(1.0, 7.0))
    both_modes(lambda x: sliding_window_view(x, 2, axis=1).prod(axis=-1),
               np.arange(1.0, 7.0).reshape(2, 3))


def test_sliding_window_view_values_unchanged():
    from numpy.lib.stride_tricks import sliding_window_view

    for run in (ad.grad, ad.jacfwd):
        np.testing.assert_allclose(run(lambda x: np.sum(sliding_window_view(x, 2)[1]))(X5),
                                   [0.0, 1.0, 1.0, 0.0, 0.0])
    with pytest.raises(MissingRuleError, match="writeable"):
        ad.grad(lambda x: np.sum(sliding_window_view(x, 2, writeable=True)))(X5)
    np.testing.assert_array_equal(
        ad.vjp(lambda x: sliding_window_view(x, 2), X5)[0], sliding_window_view(X5, 2))


def test_as_strided_raises():
    from numpy.lib.stride_tricks import as_strided

    for run in (ad.grad, ad.jacfwd):
        with pytest.raises(MissingRuleError, match="as_strided"):
            run(lambda x: np.sum(as_strided(x, shape=(3, 3), strides=(8, 8)) ** 2))(X5)


def test_object_array_raises_in_both_modes():
    f = lambda t: np.asarray([t * t], dtype=object).astype(float)[0]  # noqa: E731
    for run in (ad.grad, ad.derivative):
        with pytest.raises(MissingRuleError, match="object array"):
            run(f)(0.5)


# -- E1: SciPy's nested quadratures --------------------------------------------------------------

def test_dblquad_tplquad_nquad_closing_over_the_parameter():
    si = pytest.importorskip("scipy.integrate")
    both_modes(lambda k: si.dblquad(lambda y, x: np.exp(-k * x * y), 0, 1, 0, 1)[0], 0.7,
               rtol=1e-5)
    both_modes(lambda k: si.dblquad(lambda y, x: k * x * y, 0, 1, 0, lambda x: x)[0], 0.7)
    # tplquad: ~9,000 integrand calls a solve, each differentiated: once, in one mode
    triple = lambda k: si.tplquad(lambda z, y, x: np.exp(-k * x * y * z), 0, 1, 0, 1, 0, 1)[0]  # noqa: E731
    np.testing.assert_allclose(ad.grad(triple)(0.7), fd(triple, 0.7), rtol=1e-5, atol=1e-7)
    both_modes(lambda k: si.nquad(lambda x, y: np.sin(k * x + y), [[0, 1], [0, 2]])[0], 0.7)
