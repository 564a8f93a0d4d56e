"""Found from outside (session 13: autograd's suite ported through our API, library code).

1. ``np.concatenate(x)`` / ``np.vstack(x)`` / ``np.stack(x)`` of an *array* ``x`` (its rows the
   sequence): the reverse rules returned the rows' cotangents as a list.  Under an enclosing
   forward derivative (``jvp(grad(f))``, ``jacfwd(grad(f))``, ``derivative`` of a gradient) the
   list was made an array behind its back: zeros; and ``np.concatenate(x * 2.0)`` raised
   ``can't multiply sequence by non-int``.
2. ``odeint``/``solve_ivp`` differentiated with respect to their times gave a silent 0: the
   times were detached.  They raise ``MissingRuleError`` (docs/limitations.md).
3. A solver's ``args`` tuple read back from a list or a dict (``kept.append((k,))``;
   ``quad(f, 0, 1, args=kept[0])``) lost its tangent in forward mode: 0.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

import overdub_ad as ad
from overdub_ad import MissingRuleError, derivative, grad, hessian, jacfwd, jacrev, jvp

scipy = pytest.importorskip("scipy")
from scipy.integrate import odeint, quad, solve_ivp  # noqa: E402

X = np.array([[0.5, -1.0], [2.0, 0.3]])

JOINERS = {
    "concatenate": lambda x: np.concatenate(x),
    "concatenate axis=None": lambda x: np.concatenate(x, axis=None),
    "vstack": lambda x: np.vstack(x),
    "hstack": lambda x: np.hstack(x),
    "stack": lambda x: np.stack(x),
    "stack axis=1": lambda x: np.stack(x, axis=1),
    "column_stack": lambda x: np.column_stack(x),
}


@pytest.mark.parametrize("join", JOINERS.values(), ids=JOINERS.keys())
def test_second_derivatives_through_joining_the_rows_of_an_array(join):
    def f(x):
        return np.sum(join(x) ** 3)

    want = np.diag(6 * X.ravel()).reshape(2, 2, 2, 2)
    np.testing.assert_allclose(grad(f)(X), 3 * X ** 2)
    np.testing.assert_allclose(hessian(f)(X), want)
    np.testing.assert_allclose(jacfwd(grad(f))(X), want)
    np.testing.assert_allclose(jacrev(grad(f))(X), want)
    v = np.array([[1.0, -2.0], [0.5, 3.0]])
    np.testing.assert_allclose(jvp(grad(f), (X,), (v,))[1], 6 * X * v)
    np.testing.assert_allclose(ad.hvp(f, X, v), 6 * X * v)


@pytest.mark.parametrize("join", JOINERS.values(), ids=JOINERS.keys())
def test_joining_the_rows_of_a_computed_array(join):
    def f(x):
        return np.sum(join(np.sin(x) * 2.0))

    np.testing.assert_allclose(grad(f)(X), 2 * np.cos(X))
    np.testing.assert_allclose(jvp(f, (X,), (np.ones_like(X),))[1], np.sum(2 * np.cos(X)))


def test_the_pullback_of_vstack_is_linear_in_its_cotangent_under_a_derivative():
    x = np.array([0.3, -1.2])
    ct = np.array([[1.0], [2.0]])

    def pull(x, c):
        return ad.vjp(np.vstack, x)[1](c)[0]

    np.testing.assert_allclose(pull(x, ct), [1.0, 2.0])
    np.testing.assert_allclose(jvp(pull, (x, ct), (np.zeros(2), ct))[1], [1.0, 2.0])
    w = np.array([[1.0], [2.0]])
    np.testing.assert_allclose(
        derivative(lambda t: grad(lambda x: np.sum(t * w * np.vstack(x)))(x), 1.0), [1.0, 2.0])


def _rhs(y, t):
    return -y + t


ODE_TIMES = {
    "odeint t": lambda t1: odeint(_rhs, np.array([1.0]), np.array([0.0, t1]))[-1, 0],
    "odeint t list": lambda t1: odeint(_rhs, np.array([1.0]), [0.0, t1])[-1, 0],
    "odeint t keyword": lambda t1: odeint(_rhs, np.array([1.0]), t=[0.0, t1])[-1, 0],
    "solve_ivp t_span": lambda t1: solve_ivp(lambda t, y: -y + t, (0.0, t1),
                                             np.array([1.0])).y[0, -1],
    "solve_ivp t_eval": lambda t1: solve_ivp(lambda t, y: -y + t, (0.0, 2.0), np.array([1.0]),
                                             t_eval=[t1]).y[0, -1],
}


@pytest.mark.parametrize("f", ODE_TIMES.values(), ids=ODE_TIMES.keys())
@pytest.mark.parametrize("api", ["grad", "jvp"])
def test_differentiating_an_ode_solution_in_its_times_raises(f, api):
    with pytest.raises(MissingRuleError, match="with respect to its times"):
        if api == "grad":
            grad(f)(0.7)
        else:
            jvp(f, (0.7,), (1.0,))


def test_an_ode_solution_in_its_parameters_still_differentiates():
    def f(k):
        return solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0]), rtol=1e-10,
                         atol=1e-12, t_eval=[0.5, 1.0]).y[0, -1]

    want = -math.exp(-0.7)
    assert grad(f)(0.7) == pytest.approx(want, rel=1e-6)
    assert jvp(f, (0.7,), (1.0,))[1] == pytest.approx(want, rel=1e-6)


def _integrand(s, k):
    return math.exp(-k * s)


def _appended(k):
    kept = []
    kept.append((k,))
    return quad(_integrand, 0.0, 1.0, args=kept[0])[0]


def _positional(k):
    kept = []
    kept.append((k,))
    return quad(_integrand, 0.0, 1.0, kept[0])[0]


def _dict_item(k):
    options = {"args": ()}
    options["args"] = (k,)
    return quad(_integrand, 0.0, 1.0, **options)[0]


@pytest.mark.parametrize("f", [_appended, _positional, _dict_item])
def test_solver_arguments_read_back_from_containers_keep_their_derivative(f):
    k = 0.7
    want = (math.exp(-k) * (k + 1) - 1) / k ** 2  # d/dk (1 - e^-k) / k
    for _ in range(2):
        assert derivative(f, k) == pytest.approx(want, rel=1e-9)
        assert grad(f)(k) == pytest.approx(want, rel=1e-9)
        assert jvp(f, (k,), (1.0,))[1] == pytest.approx(want, rel=1e-9)


def _symmetric_with_negative_eigenvalues():
    a = np.random.default_rng(42).standard_normal((3, 3))
    a = 0.5 * (a + a.T)
    assert np.linalg.eigvalsh(a).min() < 0
    return a


def _fd(f, x, direction, eps=1e-5):
    return (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)


@pytest.mark.parametrize("name", ["sqrtm", "logm", "expm"])
def test_second_derivatives_of_matrix_functions_with_complex_values(name):
    # the Frechet derivative came from f of the block matrix [[A, E], [0, A]], whose doubled
    # negative eigenvalues rounding splits across the branch cut: grad of grad was 1e13..1e19
    import scipy.linalg as sla
    fn = getattr(sla, name)
    a = _symmetric_with_negative_eigenvalues()
    rng = np.random.default_rng(7)
    c, v, w = (rng.standard_normal((3, 3)) for _ in range(3))

    def loss(a):
        return np.real(np.sum(c * fn(a)))

    def directional(a):
        return np.sum(grad(loss)(a) * v)

    assert np.sum(grad(loss)(a) * w) == pytest.approx(_fd(loss, a, w), rel=1e-6)
    assert jvp(loss, (a,), (w,))[1] == pytest.approx(_fd(loss, a, w), rel=1e-6)
    want = _fd(directional, a, w)
    assert np.sum(grad(directional)(a) * w) == pytest.approx(want, rel=1e-5)
    assert jvp(directional, (a,), (w,))[1] == pytest.approx(want, rel=1e-5)
    assert np.sum(ad.hvp(loss, a, w) * v) == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("name", ["sqrtm", "logm"])
def test_matrix_functions_of_a_general_matrix_in_both_modes(name):
    import scipy.linalg as sla
    fn = getattr(sla, name)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    c, w = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))

    def loss(a):
        return np.real(np.sum(c * fn(a)))

    want = _fd(loss, a, w)
    assert np.sum(grad(loss)(a) * w) == pytest.approx(want, rel=1e-6)
    assert jvp(loss, (a,), (w,))[1] == pytest.approx(want, rel=1e-6)
    np.testing.assert_allclose(jacfwd(loss)(a), grad(loss)(a), rtol=1e-10, atol=1e-12)


def _written_then_summed(t):
    a = np.zeros(2)
    a[0] = t
    a[1:] = 2.0 * t
    return sum(a) ** 2  # the builtin sum of an array written in place: 9 t^2


def test_forward_over_forward_through_the_builtin_sum_of_a_written_array():
    # found from outside (a generated program): the inner derivative computed sum(a)'s primal
    # by iterating a natively, where the outer one keeps a's tangent in its record of the
    # memory: second derivatives 0
    t = 1.5
    assert derivative(_written_then_summed, t) == pytest.approx(18 * t)
    assert derivative(lambda t: derivative(_written_then_summed, t), t) == pytest.approx(18.0)
    x = np.array([0.5, 2.0])

    def f(x):
        a = np.zeros(2)
        a[:] = x
        return sum(a) ** 2

    np.testing.assert_allclose(jacfwd(jacfwd(f))(x), np.full((2, 2), 2.0))
    np.testing.assert_allclose(hessian(f)(x), np.full((2, 2), 2.0))


def test_reverse_inner_through_the_builtin_sum_of_a_written_array():
    assert grad(grad(_written_then_summed))(1.5) == pytest.approx(18.0)
    assert derivative(grad(_written_then_summed), 1.5) == pytest.approx(18.0)
    x = np.array([0.5, 2.0])

    def f(x):
        a = np.zeros(2)
        a[:] = x
        return sum(a) ** 2

    np.testing.assert_allclose(jacfwd(grad(f))(x), np.full((2, 2), 2.0))
    np.testing.assert_allclose(jacrev(jacrev(f))(x), np.full((2, 2), 2.0))


_KEYED_EXTREMA = {
    "max key abs": lambda x: max(x, key=abs) * x[0],
    "min key abs": lambda x: min(x, key=abs) * x[2],
    "max of rows by their sum": lambda x: max(np.array([[1.0, x[0]], [x[1], 0.0]]),
                                            key=lambda r: r.sum()).sum(),
    "max of rows by an item": lambda x: np.sum(max(np.outer(x, x), key=lambda r: r[2])
                                               * np.array([1.0, 2.0, 3.0])),
}


@pytest.mark.parametrize("f", _KEYED_EXTREMA.values(), ids=_KEYED_EXTREMA.keys())
def test_max_and_min_with_a_key_over_an_array(f):
    # found from outside: the rule looked for the result among the candidates by identity,
    # and an array's items are new objects each time: StopIteration out of grad
    x = np.array([0.5, -2.0, 1.0])
    fd = np.array([(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
    for _ in range(2):
        np.testing.assert_allclose(grad(f)(x), fd, atol=1e-6)
        np.testing.assert_allclose(jacfwd(f)(x), fd, atol=1e-6)
        np.testing.assert_allclose(jvp(f, (x,), (np.array([1.0, 2.0, 3.0]),))[1],
                                   fd @ [1.0, 2.0, 3.0], atol=1e-6)


class _LargestOfEachRow:
    """A user iterator whose ``__next__`` calls ``max(row, key=abs)``."""

    def __init__(self, rows):
        self.rows, self.i = rows, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i == len(self.rows):
            raise StopIteration
        self.i += 1
        return max(self.rows[self.i - 1], key=abs)


def test_a_derivative_inside_a_user_iterator_does_not_end_its_loop():
    # the StopIteration the rule raised ended the loop over the iterator silently: -2.0 for -8.0
    def g(x):
        total = 0.0
        for v in _LargestOfEachRow([x, 2 * x]):
            total = total + v
        return total + x[1]

    x = np.array([0.5, -2.0, 1.0])
    assert g(x) == -8.0
    assert jvp(g, (x,), (np.ones(3),)) == (pytest.approx(-8.0), pytest.approx(4.0))
    np.testing.assert_allclose(grad(g)(x), [0.0, 4.0, 0.0])


def test_convolutions_of_two_dimensions_to_second_order():
    # found from outside: scipy.signal.convolve of 2-D arrays (autograd's test) raised
    # MissingRuleError for SciPy's internal _correlateND
    import scipy.signal as ss
    rng = np.random.default_rng(5)
    image, kernel = rng.standard_normal((4, 5)), rng.standard_normal((2, 3))

    def f(k):
        return np.sum(ss.convolve(image, k, "same") ** 3)

    h = hessian(f)(kernel)
    eps = 1e-5
    for i in range(2):
        for j in range(3):
            e = np.zeros_like(kernel)
            e[i, j] = eps
            np.testing.assert_allclose(h[:, :, i, j],
                                       (grad(f)(kernel + e) - grad(f)(kernel - e)) / (2 * eps),
                                       rtol=1e-6, atol=1e-6)
    with pytest.raises(MissingRuleError, match="boundary='wrap'"):
        grad(lambda k: np.sum(ss.convolve2d(image, k, boundary="wrap")))(kernel)


def test_lfilter_in_its_coefficients_and_signal_to_second_order():
    import scipy.signal as ss
    rng = np.random.default_rng(2)
    b, a, x = np.array([0.5, 0.3, -0.2]), np.array([1.2, -0.4, 0.1]), rng.standard_normal(9)

    def f(a):
        return np.sum(ss.lfilter(b, a, x) ** 2)

    eps = 1e-5
    want = np.array([(grad(f)(a + eps * u) - grad(f)(a - eps * u)) / (2 * eps) for u in np.eye(3)])
    np.testing.assert_allclose(hessian(f)(a), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(jacfwd(grad(f))(a), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(MissingRuleError, match="zi="):
        grad(lambda x: np.sum(ss.lfilter(b, a, x, zi=np.zeros(2))[0]))(x)


def test_a_complex_input_gets_a_complex_cotangent_under_an_enclosing_derivative():
    # found from outside: under jvp, the pullback of np.real gave a complex input a float64
    # cotangent (complex128 without the enclosing derivative)
    zs = np.array([0.4 + 0.3j, 1 - 1j])

    def pull(z, c):
        return ad.vjp(np.real, z)[1](c)[0]

    assert pull(zs, np.ones(2)).dtype == np.complex128
    out, tangent = jvp(pull, (zs, np.ones(2)), (np.zeros(2, complex), np.array([2.0, 3.0])))
    assert out.dtype == tangent.dtype == np.complex128
    np.testing.assert_array_equal(out, [1.0, 1.0])
    np.testing.assert_array_equal(tangent, [2.0, 3.0])
    g = derivative(lambda t: grad(lambda z: t * np.sum(np.real(z)))(zs), 2.0)
    assert g.dtype == np.complex128
    np.testing.assert_array_equal(g, [1.0, 1.0])


def test_a_generalised_ufunc_written_into_out_in_forward_mode():
    # found from outside: np.matmul(X, W, out=z) under jvp raised a broadcasting error (the
    # check for a result broadcast into a larger out= array broadcast matmul's operands)
    x = np.arange(6.0).reshape(2, 3)

    def f(w):
        z = np.empty((2, 4))
        np.matmul(x, w, out=z)
        return np.sum(z ** 2)

    w, v = np.ones((3, 4)), np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    want = 2 * x.T @ (x @ w)
    for _ in range(2):
        np.testing.assert_allclose(grad(f)(w), want)
        np.testing.assert_allclose(jvp(f, (w,), (v,))[1], np.sum(want * v))
        np.testing.assert_allclose(jacfwd(f)(w), want)


class _Box:
    def __init__(self, v):
        self.v = v


class _Slotted:
    __slots__ = ("v", "w")

    def __init__(self, v):
        self.v, self.w = v, [v]


@pytest.mark.parametrize("make", [_Box, _Slotted, lambda a: {"k": _Box(a)},
                                  lambda a: [_Box(np.float64(a))], lambda a: _Box((a, 1))],
                         ids=["object", "slots", "in a dict", "in a list", "a tuple in it"])
def test_objects_returned_as_aux_hold_plain_values(make):
    # found from outside: on the forward-dual route, jvp's aux kept the route's internal dual
    # in a user object: grad(lambda x: x * aux.v) was then 0.0 for 2.0
    _, tangent, aux = jvp(lambda a: (a * a, make(a * 1.0)), (2.0,), (1.0,), has_aux=True)
    assert tangent == 4.0
    box = aux["k"] if isinstance(aux, dict) else aux[0] if isinstance(aux, list) else aux
    value = box.v[0] if isinstance(box.v, tuple) else box.v
    assert type(value) in (float, np.float64) and value == 2.0
    assert grad(lambda x: x * value)(1.0) == 2.0


def test_an_object_made_in_an_inner_jvp_and_used_by_the_outer_derivative():
    def outer(x):  # d/dx (2x * x) = 4x
        _, _, aux = jvp(lambda a: (a * x, _Box(a * x)), (2.0,), (1.0,), has_aux=True)
        return aux.v * x

    assert grad(outer)(1.5) == pytest.approx(6.0)
    assert derivative(outer, 1.5) == pytest.approx(6.0)
    assert jacfwd(outer)(1.5) == pytest.approx(6.0)


@pytest.mark.parametrize("pairs", [
    lambda x: itertools.pairwise(x),
    lambda x: itertools.combinations_with_replacement(x, 2),
    lambda x: zip(*[iter(itertools.chain.from_iterable([x, x]))] * 2),
], ids=["pairwise", "combinations_with_replacement", "chain.from_iterable"])
def test_itertools_over_an_array_in_forward_mode(pairs):
    # found from outside: itertools.pairwise over a NumPy array gave jvp 0 (reverse was right):
    # forward mode did not hand it the array's differentiated elements
    def f(x):
        return sum(a * b for a, b in pairs(x))

    x = np.array([1.0, 2.0, 3.0])
    want = grad(f)(x)
    assert np.any(want != 0)
    np.testing.assert_allclose(jacfwd(f)(x), want)
    np.testing.assert_allclose(jvp(f, (x,), (np.ones(3),))[1], np.sum(want))


@pytest.mark.parametrize("f", [lambda x: np.ones(4) * math.sqrt(2.0),
                               lambda x: (np.ones(4) * math.sqrt(2.0), x[0] * 2.0)],
                         ids=["array", "in a tuple"])
def test_the_jacobian_of_a_constant_array_output_has_its_full_shape(f):
    # found from outside: on the forward-dual route jacfwd of an output that does not depend
    # on x came out shaped like x, (3,), not (4, 3)
    x = np.array([0.1, 0.2, 0.3])
    got, want = jacfwd(f)(x), jacrev(f)(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_array_equal(g, w)
    assert np.shape(got[0] if isinstance(got, tuple) else got) == (4, 3)


def test_sorting_by_a_comparison_function_in_reverse_mode():
    # found from outside: grad raised TypeError: unhashable type: 'functools.KeyWrapper' (the
    # key a cmp_to_key makes was looked up in a dict), then MissingRuleError for calling it
    def cmp(a, b):
        return int(a > b) - int(a < b)

    def f(x):
        return sorted(x, key=functools.cmp_to_key(cmp))[0] * 3.0 + \
            sorted(list(x), key=functools.cmp_to_key(cmp))[2] ** 2

    x = np.array([0.5, 2.0, 1.0])
    for _ in range(2):
        np.testing.assert_array_equal(grad(f)(x), [3.0, 4.0, 0.0])
        np.testing.assert_array_equal(jacfwd(f)(x), [3.0, 4.0, 0.0])


def _dense(k):
    sol = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0]), dense_output=True)
    return sol.sol(0.5)[0]


def _event_time(k):
    def half(t, y):
        return y[0] - 0.5

    return solve_ivp(lambda t, y: -k * y, (0.0, 5.0), np.array([1.0]), events=half).t_events[0][0]


def _weighted(w):
    return quad(lambda x: x, 0.0, 1.0, weight="cos", wvar=w)[0]


@pytest.mark.parametrize("f, message", [(_dense, "dense_output="), (_event_time, "events="),
                                        (_weighted, "wvar=")], ids=["dense", "events", "wvar"])
@pytest.mark.parametrize("api", ["grad", "jvp"])
def test_what_solvers_compute_natively_refuses_its_derivative(f, message, api):
    # found from outside: reverse mode gave 0 through solve_ivp's interpolant (sol) and its
    # events, and both modes 0 in quad's weight variable (docs/limitations.md: MissingRuleError)
    with pytest.raises(MissingRuleError, match=message):
        if api == "grad":
            grad(f)(0.7)
        else:
            jvp(f, (0.7,), (1.0,))


def test_quad_with_a_weight_still_differentiates_in_the_integrand():
    def f(k):
        return quad(lambda x: k * x * x, 0.0, 1.0, weight="cos", wvar=2.0)[0]

    want = quad(lambda x: x * x, 0.0, 1.0, weight="cos", wvar=2.0)[0]
    assert grad(f)(0.7) == pytest.approx(want, rel=1e-8)
    assert jvp(f, (0.7,), (1.0,))[1] == pytest.approx(want, rel=1e-8)


@pytest.mark.parametrize("f", [
    lambda a: np.sum(np.polymul(a, np.array([0.0, 0.5, -1.0])) ** 2),
    lambda a: np.polyval(np.polymul(a, a), 0.7),
    lambda a: np.sum(np.polymul(np.poly1d(a), np.array([0.5, -1.0])).coeffs ** 2),
], ids=["arrays", "squared then evaluated", "a poly1d"])
def test_polymul_differentiates(f):
    # found from outside: NumPy's polymul makes its arrays poly1d objects and reads their
    # coefficients natively: every derivative was 0
    a = np.array([1.0, 2.0, 3.0])
    fd = np.array([(f(a + 1e-6 * e) - f(a - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
    for _ in range(2):
        np.testing.assert_allclose(grad(f)(a), fd, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(jacfwd(f)(a), fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(jvp(lambda a: np.polymul([0.0, 0.0], a), (a,), (a,))[0],
                                  np.polymul([0.0, 0.0], a))


def _minimiser(name):
    import scipy.optimize as so

    def objective(x, k):
        return np.sum((x - k) ** 2 + 0.1 * x ** 4)

    if name == "golden":
        return lambda k: so.golden(objective, args=(k,), tol=1e-12)
    if name == "brent":
        return lambda k: so.brent(objective, args=(k,), tol=1e-12)
    return lambda k: so.fmin(objective, np.array([0.0, 0.0]), args=(k,), xtol=1e-12,
                             ftol=1e-14, disp=False)[1]


@pytest.mark.parametrize("name", ["golden", "brent", "fmin"])
def test_minimisers_that_compare_values_differentiate_their_minimum(name):
    # found from outside: golden compares only function values, so its minimum came out
    # constant (0) in every mode; now by the implicit function theorem, as minimize_scalar
    f = _minimiser(name)
    k = 0.7
    x = f(k)
    want = 2.0 / (2.0 + 1.2 * x ** 2)  # 2 (x - k) + 0.4 x^3 = 0
    assert grad(f)(k) == pytest.approx(want, rel=1e-6)
    assert jvp(f, (k,), (1.0,))[1] == pytest.approx(want, rel=1e-6)


def test_golden_full_output_differentiates_the_minimum_value():
    import scipy.optimize as so

    def f(k):
        return so.golden(lambda x, k: (x - k) ** 2 + 0.1 * x ** 4 + k, args=(k,), tol=1e-12,
                         full_output=True)[1]

    fd = (f(0.7 + 1e-5) - f(0.7 - 1e-5)) / 2e-5
    assert grad(f)(0.7) == pytest.approx(fd, rel=1e-6)
    assert jvp(f, (0.7,), (1.0,))[1] == pytest.approx(fd, rel=1e-6)


def test_scipy_linalg_decompositions_as_numpy_differentiates_them():
    # found from outside: scipy.linalg.svd, qr, pinv and lstsq raised MissingRuleError, where
    # np.linalg's have rules (and JAX differentiates them)
    import scipy.linalg as sla
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal(5)
    cases = [
        lambda a: np.sum(sla.svd(a, full_matrices=False)[1] ** 3),
        lambda a: np.sum(np.abs(np.diag(sla.qr(a, mode="economic")[1]))),
        lambda a: np.sum(sla.qr(a, mode="r")[0] ** 2),
        lambda a: np.sum(sla.pinv(a) ** 2),
        lambda a: np.sum(sla.lstsq(a, b)[0] ** 2) + sla.lstsq(a, b)[1],
    ]
    v = rng.standard_normal(a.shape)
    for f in cases:
        fd = (f(a + 1e-6 * v) - f(a - 1e-6 * v)) / 2e-6
        assert np.sum(grad(f)(a) * v) == pytest.approx(fd, rel=1e-5)
        assert jvp(f, (a,), (v,))[1] == pytest.approx(fd, rel=1e-5)
    with pytest.raises(MissingRuleError, match="pivoting"):
        grad(lambda a: np.sum(sla.qr(a, pivoting=True)[1]))(a)


def test_helper_functions_of_a_solver_may_close_over_differentiated_values():
    # found from outside: fprime= and jac= closing over the parameters raised MissingRuleError
    # (the solver calls them natively); they only guide the solver, the derivative comes from
    # the callback's
    import scipy.optimize as so

    def root(k):
        return so.newton(lambda x: x ** 3 - k, 1.0, fprime=lambda x: 3 * k * x ** 2 / k,
                         tol=1e-12)

    def minimum(k):
        return so.minimize(lambda x: np.sum((x - k) ** 2 + x ** 4), np.zeros(2),
                           jac=lambda x: 2 * (x - k) + 4 * x ** 3, method="BFGS",
                           tol=1e-12).x[0]

    for f in (root, minimum):
        fd = (f(2.0 + 1e-5) - f(2.0 - 1e-5)) / 2e-5
        assert grad(f)(2.0) == pytest.approx(fd, rel=1e-6)
        assert jvp(f, (2.0,), (1.0,))[1] == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("tangent", [np.ones(5), 2.0, "oops"], ids=["(5,)", "scalar", "text"])
def test_a_custom_jvp_tangent_of_another_shape_is_refused(tangent):
    # found from outside: a custom_jvp rule's tangent of shape (5,) for an output of shape (2,)
    # gave jvp 5.0 and grad [0, 0] silently
    @ad.custom_jvp
    def f(y):
        return np.sin(y)

    @f.defjvp
    def _(primals, tangents):
        return np.sin(primals[0]), tangent

    a = np.array([0.1, 0.2])
    error = TypeError if isinstance(tangent, str) else ValueError
    with pytest.raises(error, match=r"jvp rule of .*\bf\b"):
        jvp(lambda a: np.sum(f(a)), (a,), (a,))
    with pytest.raises(error, match=r"jvp rule of .*\bf\b"):
        grad(lambda a: np.sum(f(a)))(a)
