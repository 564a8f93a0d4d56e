"""Forward mode, found from outside (session 15).

- Forward over forward on the dual route: an inner ``derivative``/``jvp`` that stored a value
  into a list, dict or object made by the outer function (``acc[0] = x * y``) left it there
  boxed with the inner tangent, and the outer's result raised TagError ("escaped"). A nested
  run now writes only into what it made itself; a write into an enclosing run's container
  stops the dual route, which declines (``explain`` says why) and the general route computes
  the derivative.
- A ``defjvp`` rule written for one direction (``A @ dx``, ``x * np.sum(dx)``) gave a
  silently wrong ``jacfwd``: it was called with jacfwd's whole batch of directions at once.
  The user's forward rules now run once per direction, their tangents stacked (as
  ``custom_jvp``'s do); overdub's own rules stay batched.
- ``jacfwd(f, chunk=k)`` (and a tuple ``argnums``) of a function writing into its argument
  (``u *= 2``) differentiated each pass at the point the previous pass left: every pass now
  starts from the arguments as given, and the caller's array ends as one call leaves it.
- ``hessian(f, has_aux=True)`` with ``f`` not returning a pair named ``Tagged`` in its
  message; it names the user's type.
"""

from __future__ import annotations

import numpy as np
import pytest

from overdub_ad import (D, defjvp, defvjp, derivative, explain, grad, hessian, jacfwd, jacrev,
                        jvp)
from overdub_ad.testing import REFERENCE, force_route, isolated_rules

pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, REFERENCE])


# -- 1. an inner derivative writing into the outer function's containers ----------------------

class Box:
    pass


def _store_item(x):
    acc = [0.0]

    def inner(y):
        acc[0] = x * y
        return y * y
    derivative(inner, 2.0)
    return acc[0] * x  # 2 x^2


def _store_append(x):
    acc = []

    def inner(y):
        acc.append(x * y)
        return y * y
    derivative(inner, 2.0)
    return acc[0] * x


def _store_dict(x):
    d = {}

    def inner(y):
        d["k"] = x * y
        return y * y
    derivative(inner, 2.0)
    return d["k"] * x


def _store_attribute(x):
    b = Box()

    def inner(y):
        b.v = x * y
        return y * y
    derivative(inner, 2.0)
    return b.v * x


def _store_constant_times_y(x):
    acc = [0.0]

    def inner(y):
        acc[0] = 3.0 * y  # (a tangent of the inner derivative only: 6.0 after it)
        return y * y
    derivative(inner, 2.0)
    return acc[0] * x  # 6 x


def _store_inner_list(x):
    acc = [0.0]

    def inner(y):
        acc[0] = [x * y]
        return y * y
    derivative(inner, 2.0)
    return acc[0][0] * x


def _store_by_jvp(x):
    acc = [0.0]

    def inner(y):
        acc[0] = x * y
        return y * y
    jvp(inner, (2.0,), (1.0,))
    return acc[0] * x


def _store_and_read_back(x):
    acc = [0.0]

    def inner(y):
        acc[0] = x * y
        return acc[0] * y  # x y^2: 4 x at y = 2
    return derivative(inner, 2.0) * x  # 4 x^2


_EXPECTED = {  # d/dx at 1.5
    _store_item: 4 * 1.5, _store_append: 4 * 1.5, _store_dict: 4 * 1.5,
    _store_attribute: 4 * 1.5, _store_constant_times_y: 6.0,
    _store_inner_list: 4 * 1.5, _store_by_jvp: 4 * 1.5, _store_and_read_back: 8 * 1.5}


@ROUTES
@pytest.mark.parametrize("f", list(_EXPECTED), ids=lambda f: f.__name__)
def test_inner_derivative_writes_into_outer_containers(route, f):
    with force_route(route):
        for _ in range(2):
            assert D(f)(1.5) == pytest.approx(_EXPECTED[f])


def test_the_dual_route_declines_and_says_why():
    report = explain(D, _store_item, 1.5)
    assert report.result == pytest.approx(6.0)
    assert "existed before the run" in str(report)


def test_inner_derivatives_without_outer_writes():
    # (sibling inner derivatives, containers of the outer written by the outer only, and
    # containers an inner one makes and writes itself)
    def outer(x):
        acc = []

        def inner(y):
            made = [x * y]
            made.append(y)
            made[0] = made[0] * y
            return made[0] + made[1]  # x y^2 + y
        acc.append(derivative(inner, 2.0))  # 4 x + 1
        acc.append(derivative(inner, 3.0))  # 6 x + 1
        return acc[0] * acc[1]
    with force_route(None):
        report = explain(D, outer, 1.5)
    assert report.result == pytest.approx(2 * 24 * 1.5 + 10)
    assert "forward-dual: ran" in str(report)
    for route in (None, REFERENCE):
        with force_route(route):
            for _ in range(2):
                assert D(outer)(1.5) == pytest.approx(2 * 24 * 1.5 + 10)


# -- 2. user rules written for one direction, under jacfwd's batch -----------------------------

A = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0], [4.0, 0.0, 1.0]])
X = np.array([0.2, -0.5, 0.7])


def _lin(x):
    return A @ x


def _scaled(x):
    return x * np.sum(x)


def _scaled_jacobian(x):
    return np.diag(np.full(x.size, x.sum())) + np.outer(x, np.ones(x.size))


@pytest.fixture
def one_direction_rules():
    with isolated_rules():
        defjvp(_lin, lambda dx, out, x: A @ dx)
        defvjp(_lin, lambda ct, out, x: A.T @ ct)
        defjvp(_scaled, lambda dx, out, x: dx * np.sum(x) + x * np.sum(dx))
        defvjp(_scaled, lambda ct, out, x: ct * np.sum(x) + np.sum(ct * x))
        yield


@ROUTES
@pytest.mark.parametrize("chunk", [None, 2])
def test_jacfwd_of_rules_written_for_one_direction(route, chunk, one_direction_rules):
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(jacfwd(_lin, chunk=chunk)(X), A)
            np.testing.assert_allclose(jacfwd(_scaled, chunk=chunk)(X), _scaled_jacobian(X))
            np.testing.assert_allclose(jacrev(_lin)(X), A)
            np.testing.assert_allclose(jacfwd(lambda v: np.tanh(_lin(v)))(X),
                                       np.diag(1 - np.tanh(A @ X) ** 2) @ A)


@ROUTES
def test_second_order_through_rules_written_for_one_direction(route, one_direction_rules):
    def energy(v):
        return np.sum(_lin(v) ** 2)
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(hessian(energy)(X), 2 * A.T @ A)
            np.testing.assert_allclose(jacfwd(jacfwd(energy))(X), 2 * A.T @ A)
            np.testing.assert_allclose(jacfwd(grad(energy))(X), 2 * A.T @ A)


@ROUTES
def test_a_scalar_rule_under_a_batch(route):
    # (a rule written for numbers, float(dt), of a function of one number, under jacfwd's
    # directions of a vector around it)
    def cube(t):
        return t ** 3
    with isolated_rules():
        defjvp(cube, lambda dt, out, t: 3.0 * t ** 2 * float(dt))
        with force_route(route):
            for _ in range(2):
                np.testing.assert_allclose(jacfwd(lambda v: cube(v[0]) * v)(X),
                                           np.diag(np.full(3, X[0] ** 3))
                                           + np.outer(3 * X[0] ** 2 * X, [1.0, 0.0, 0.0]))


@ROUTES
def test_a_rule_of_a_tuple_argument_under_a_batch(route):
    def mixed(pair):
        return A @ pair[0] + pair[1] * pair[1]
    point = (X, np.array([1.0, 2.0, 3.0]))
    with isolated_rules():
        defjvp(mixed, lambda dp, out, p: A @ dp[0] + 2.0 * p[1] * dp[1])
        with force_route(route):
            for _ in range(2):
                j0, j1 = jacfwd(mixed)(point)
                np.testing.assert_allclose(j0, A)
                np.testing.assert_allclose(j1, np.diag(2.0 * point[1]))


# -- 3. jacfwd in several passes of a function writing into its argument -----------------------

def _doubling(u):
    u *= 2.0
    return u ** 2


@ROUTES
@pytest.mark.parametrize("chunk", [None, 1, 2])
def test_every_pass_starts_from_the_given_point(route, chunk):
    with force_route(route):
        for _ in range(2):
            u = np.array([1.0, 2.0, 3.0])
            np.testing.assert_allclose(jacfwd(_doubling, chunk=chunk)(u),
                                       np.diag([8.0, 16.0, 24.0]))
            np.testing.assert_allclose(u, [2.0, 4.0, 6.0])  # (as after one call)


@ROUTES
def test_several_argnums_and_a_list_argument_written_in_place(route):
    def both(u, v):
        u *= 2.0
        v += u
        return u * v

    def first_of(pair):
        pair[0] *= 2.0
        return pair[0] * pair[1]
    with force_route(route):
        for _ in range(2):
            u, v = np.array([1.0, 2.0]), np.array([3.0, 4.0])
            ju, jv = jacfwd(both, argnums=(0, 1))(u, v)
            np.testing.assert_allclose(np.diag(ju), [14.0, 24.0])
            np.testing.assert_allclose(np.diag(jv), [2.0, 4.0])
            np.testing.assert_allclose(u, [2.0, 4.0])
            np.testing.assert_allclose(v, [5.0, 8.0])
            pair = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
            j0, j1 = jacfwd(first_of, chunk=1)(pair)
            np.testing.assert_allclose(j0, np.diag([6.0, 8.0]))
            np.testing.assert_allclose(j1, np.diag([2.0, 4.0]))
            np.testing.assert_allclose(pair[0], [2.0, 4.0])


@ROUTES
def test_passes_inside_an_enclosing_derivative(route):
    u0 = np.array([1.0, 2.0, 3.0])
    with force_route(route):
        for _ in range(2):
            np.testing.assert_allclose(
                grad(lambda w: np.sum(jacfwd(_doubling, chunk=1)(w * 1.0)))(u0.copy()),
                [8.0, 8.0, 8.0])
            np.testing.assert_allclose(
                np.diag(jacfwd(lambda w: np.sum(jacfwd(_doubling, chunk=1)(w * 1.0), axis=0),
                               chunk=1)(u0.copy())), [8.0, 8.0, 8.0])


# -- 4. has_aux errors name the user's type ------------------------------------------------------

def _has_aux_error(call):
    with pytest.raises(TypeError, match="must return a pair") as info:
        call()
    return str(info.value)


@ROUTES
def test_jacfwd_has_aux_error_names_the_users_type(route):
    with force_route(route):
        for _ in range(2):
            # (inside an enclosing derivative, f's output is that derivative's tagged value)
            message = _has_aux_error(lambda: grad(
                lambda x: np.sum(jacfwd(lambda v: v * v, has_aux=True)(x)))(np.ones(2)))
            assert "got ndarray" in message and "Tagged" not in message


# (hessian's error is raised by the reverse gradient under jacfwd)
@ROUTES
@pytest.mark.parametrize("api", [hessian, jacrev, grad])
def test_has_aux_error_names_the_users_type(route, api):
    with force_route(route):
        for x in (1.5, np.ones(2)):
            for _ in range(2):
                for message in (
                        _has_aux_error(lambda: api(lambda v: np.sum(v * v), has_aux=True)(x)),
                        _has_aux_error(lambda: jacfwd(api(lambda v: np.sum(v * v),
                                                          has_aux=True))(x))):
                    assert "Tagged" not in message and "got float" in message
