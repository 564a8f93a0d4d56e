"""Rules for NumPy's random samplers, by reparametrisation: the same draws, differentiated
with respect to their parameters.

A location-scale sampler draws ``out = loc + scale * z`` with ``z`` from the standard
distribution (``normal``, ``laplace``, ``logistic``, ``gumbel``): ``d out / d loc = 1`` and
``d out / d scale = z = (out - loc) / scale``, read back from the draw itself, so the rules
need no access to the generator's state.  Likewise ``uniform(low, high)`` draws
``low + (high - low) * u`` (``u = (out - low) / (high - low)``) and ``exponential(scale)``
draws ``scale * e`` (``e = out / scale``).  JAX and PyTorch's ``rsample`` give the same
derivatives.  Other samplers (``gamma``, ``beta``, ``poisson``...) have no rule: differentiating
their parameters raises ``MissingRuleError``, never a silent zero.

The rules are the methods' (``np.random.Generator.normal``), so they apply to
``rng.normal(mu, s)`` and to the legacy ``np.random.normal`` (a ``RandomState`` method); the
generator itself is argument 0, without a derivative.  Abbreviations as in ``_common``.

``permutation``, ``choice`` and ``shuffle`` of an array (bootstrap resamples, minibatches) are
restated as the indexing they amount to: the generator draws the indices for the array's
length -- NumPy's own algorithm draws exactly these for an array (checked for ``Generator``
and ``RandomState``, along any axis) -- and the result is ``np.take(x, indices)``, written
back in place by ``shuffle``.  ``permuted`` (each slice on its own) has no rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from overdub import opaque

from .._rules import defjvp, defstandin, defvjp, nondifferentiable
from ._common import fit, lift


def _tangent(t: Any, dx: Any, x: Any, out: Any) -> Any:
    """``t * dx`` (``t`` of the output's shape) with ``dx``'s batch dimensions in front."""
    return fit(t * lift(dx, x, out), dx, x, out)


def _location_scale(sampler: Any) -> None:
    """Rules of ``sampler(loc=0.0, scale=1.0, size=None)``."""
    def z(out: Any, loc: Any, scale: Any) -> Any:
        return (out - loc) / scale

    defjvp(sampler, None,
           lambda dl, out, rng, loc=0.0, scale=1.0, size=None:
               _tangent(np.ones_like(out), dl, loc, out),
           lambda ds, out, rng, loc=0.0, scale=1.0, size=None:
               _tangent(z(out, loc, scale), ds, scale, out))
    defvjp(sampler, None,
           lambda ct, out, rng, loc=0.0, scale=1.0, size=None: ct * np.ones_like(out),
           lambda ct, out, rng, loc=0.0, scale=1.0, size=None: ct * z(out, loc, scale))


def _uniform(sampler: Any) -> None:
    """Rules of ``sampler(low=0.0, high=1.0, size=None)``."""
    def u(out: Any, low: Any, high: Any) -> Any:
        return (out - low) / (high - low)

    defjvp(sampler, None,
           lambda dl, out, rng, low=0.0, high=1.0, size=None:
               _tangent(1.0 - u(out, low, high), dl, low, out),
           lambda dh, out, rng, low=0.0, high=1.0, size=None:
               _tangent(u(out, low, high), dh, high, out))
    defvjp(sampler, None,
           lambda ct, out, rng, low=0.0, high=1.0, size=None: ct * (1.0 - u(out, low, high)),
           lambda ct, out, rng, low=0.0, high=1.0, size=None: ct * u(out, low, high))


def _exponential(sampler: Any) -> None:
    """Rules of ``sampler(scale=1.0, size=None)``."""
    defjvp(sampler, None,
           lambda ds, out, rng, scale=1.0, size=None: _tangent(out / scale, ds, scale, out))
    defvjp(sampler, None,
           lambda ct, out, rng, scale=1.0, size=None: ct * (out / scale))


for _kind in (np.random.Generator, np.random.RandomState):
    for _name in ("normal", "laplace", "logistic", "gumbel"):
        _location_scale(getattr(_kind, _name))
    _uniform(_kind.uniform)
    _exponential(_kind.exponential)


# -- permutation, choice, shuffle: the indexing they amount to ---------------------------------

def _drawn(method: Any) -> Any:
    """``method`` (``Generator.permutation``...) run natively as a leaf, for the indices it
    draws: integers, constant almost everywhere in ``choice``'s probabilities ``p`` (as in
    JAX), so a differentiated ``p`` gives them no derivative."""
    @opaque
    def drawn(rng: Any, *args: Any, **kwargs: Any) -> Any:
        return method(rng, *args, **kwargs)
    drawn.__module__ = "numpy.random"
    drawn.__name__, drawn.__qualname__ = method.__name__, method.__qualname__
    nondifferentiable(drawn)
    DRAWN.append(drawn)
    return drawn


DRAWN: list[Any] = []  # (for the tests of every declaration)


def _restated(kind: Any) -> None:
    permutation, choice = _drawn(kind.permutation), _drawn(kind.choice)
    generator = kind is np.random.Generator

    def permuted_copy(rng: Any, x: Any, axis: int = 0) -> Any:
        if np.ndim(x) == 0:  # permutation(n): the indices themselves
            return permutation(rng, x, **({"axis": axis} if generator else {}))
        return np.take(x, permutation(rng, np.shape(x)[axis]), axis=axis)

    def chosen(rng: Any, a: Any, size: Any = None, replace: bool = True, p: Any = None,
               axis: int = 0, shuffle: bool = True) -> Any:
        extra = {"axis": axis, "shuffle": shuffle} if generator else {}
        if np.ndim(a) == 0:  # choice(n): the indices themselves
            return choice(rng, a, size, replace, p, **extra)
        drawn = choice(rng, np.shape(a)[axis], size, replace, p,
                       **({"shuffle": shuffle} if generator else {}))
        return np.take(a, drawn, axis=axis)

    def shuffled(rng: Any, x: Any, axis: int = 0) -> None:
        if type(x) is list:
            order = permutation(rng, len(x))
            x[:] = [x[i] for i in order]
            return
        order = permutation(rng, np.shape(x)[axis])
        x[...] = np.take(x, order, axis=axis)

    if not generator:  # (RandomState's take no axis, no shuffle)
        defstandin(kind.permutation, lambda rng, x: permuted_copy(rng, x))
        defstandin(kind.choice, lambda rng, a, size=None, replace=True, p=None:
                   chosen(rng, a, size, replace, p))
        defstandin(kind.shuffle, lambda rng, x: shuffled(rng, x))
        return
    defstandin(kind.permutation, permuted_copy)
    defstandin(kind.choice, chosen)
    defstandin(kind.shuffle, shuffled)


for _kind in (np.random.Generator, np.random.RandomState):
    _restated(_kind)
