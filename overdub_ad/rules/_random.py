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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rules import defjvp, defvjp
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
