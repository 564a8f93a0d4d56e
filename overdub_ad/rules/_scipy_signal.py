"""Rules for ``scipy.signal``'s convolutions and correlations of any number of dimensions.

``convolve(in1, in2, mode)`` is the ``mode`` window -- centred, as SciPy takes it -- of the full
convolution, so it is linear in each argument: its tangent is the convolution of the tangent
with the other argument, in the same mode.  Its adjoint with respect to ``in1`` is the
cotangent, put back at its window in the full output's zeros, correlated with ``in2`` in the
``valid`` mode (and with respect to ``in2``, correlated with ``in1``).  ``correlate(in1, in2)``
is ``convolve(in1, in2 reversed on every axis and conjugated)``; ``convolve2d`` and
``correlate2d`` are the same functions of two dimensions with a zero boundary (another
``boundary`` or ``fillvalue`` has no rule: ``MissingRuleError``).  One-dimensional arrays
reach NumPy's ``np.convolve``, whose rules are in ``_products``; SciPy's FFT convolutions are
differentiated through their FFTs.

``lfilter(b, a, x)`` is ``y = (B / A) x`` along ``axis`` (``B``, ``A`` the polynomials in the
delay of ``b`` and ``a``): ``dy = (db x - da y) / A + (B / A) dx``, each term a filtering; its
transpose filters the cotangent backwards in time (``1 / A`` is causal: its transpose runs
the other way), and ``b``'s and ``a``'s cotangents are that filtered cotangent's products with
``x`` and ``y`` delayed.  Initial conditions (``zi``) have no rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rules import ZERO, MissingRuleError, defjvp, defvjp
from ._common import map_batch

try:
    import scipy.signal as _signal
except ImportError:  # pragma: no cover - overdub_ad works without SciPy
    _signal = None


def _reversed(x: Any) -> Any:
    """``x`` reversed on every axis and conjugated: what turns a correlation into a
    convolution."""
    return np.conj(np.flip(x))


def _window(full: Any, out: Any, ceil: bool) -> tuple[slice, ...]:
    """Where a mode's output lies in the full convolution: centred, as SciPy crops it (an odd
    margin split with the extra element before the window for ``correlate2d``'s ``same``)."""
    return tuple(slice((f - o + ceil) // 2, (f - o + ceil) // 2 + o)
                 for f, o in zip(np.shape(full), np.shape(out)))


def _bilinear_jvp(fn: Any, position: int) -> Any:
    """The tangent of ``fn(in1, in2, mode)``, linear in each argument: ``fn`` of the tangent
    and the other argument (each batch slice of the tangent in turn)."""
    def rule(d: Any, out: Any, /, in1: Any, in2: Any, mode: str = "full", *args: Any,
             **kw: Any) -> Any:
        if position == 0:
            return map_batch(lambda t: fn(t, in2, mode, *args, **kw), d, np.ndim(in1))
        return map_batch(lambda t: fn(in1, t, mode, *args, **kw), d, np.ndim(in2))
    return rule


def _convolve_vjp(position: int, correlate: bool, ceil: bool = False) -> Any:
    def rule(ct: Any, out: Any, /, in1: Any, in2: Any, mode: str = "full", *args: Any,
             **kw: Any) -> Any:
        second = _reversed(in2) if correlate else in2  # the convolution's second argument
        full_shape = tuple(a + b - 1 for a, b in zip(np.shape(in1), np.shape(in2)))
        full = np.zeros(full_shape, dtype=np.result_type(ct, in1, in2))
        full[_window(full, out, ceil and mode == "same")] = ct
        # (the transpose, not the adjoint: correlate conjugates its second argument, so it is
        # given conjugated)
        if position == 0:
            return _signal.correlate(full, np.conj(second), "valid")
        g = _signal.correlate(full, np.conj(in1), "valid")  # the second argument's cotangent
        return _reversed(g) if correlate else g
    return rule


def _zero_boundary(fn: Any, rule: Any) -> Any:
    """``rule`` for ``convolve2d``/``correlate2d``, whose zero boundary is ``convolve``'s."""
    def checked(d: Any, out: Any, /, in1: Any, in2: Any, mode: str = "full",
                boundary: str = "fill", fillvalue: Any = 0) -> Any:
        if boundary != "fill" or fillvalue != 0:
            raise MissingRuleError(f"no derivative rule for scipy.signal.{fn.__name__} with "
                                   f"boundary={boundary!r}, fillvalue={fillvalue!r}: only a "
                                   f"zero boundary (boundary='fill', fillvalue=0)")
        return rule(d, out, in1, in2, mode)
    return checked


def _no_zi(zi: Any) -> None:
    if zi is not None:
        raise MissingRuleError("no derivative rule for scipy.signal.lfilter with initial "
                               "conditions (zi=)")


def _lfilter_jvp(position: int) -> Any:
    def rule(d: Any, out: Any, /, b: Any, a: Any, x: Any, axis: int = -1, zi: Any = None) -> Any:
        _no_zi(zi)
        if position == 2:  # (the batch in front: the axis counted from the end)
            back = axis - np.ndim(x) if axis >= 0 else axis
            return map_batch(lambda t: _signal.lfilter(b, a, t, axis=back), d, np.ndim(x))
        if position == 0:
            return map_batch(lambda t: _signal.lfilter(t, a, x, axis=axis), d, 1)
        return map_batch(lambda t: -_signal.lfilter(t, a, out, axis=axis), d, 1)
    return rule


def _lfilter_vjp(position: int) -> Any:
    def rule(ct: Any, out: Any, /, b: Any, a: Any, x: Any, axis: int = -1,
             zi: Any = None) -> Any:
        _no_zi(zi)
        taps = b if position == 2 else np.ones(1)
        v = np.flip(_signal.lfilter(taps, a, np.flip(ct, axis), axis=axis), axis)
        if position == 2:
            return v
        signal = x if position == 0 else out  # delayed by k, times v, summed: the k-th tap's
        v, signal = np.moveaxis(v, axis, -1), np.moveaxis(signal, axis, -1)
        n = np.shape(v)[-1]
        count = np.shape(b if position == 0 else a)[0]
        parts = [np.sum(v[..., k:] * signal[..., :n - k]) if k < n else np.zeros(())
                 for k in range(count)]
        return np.stack(parts) if position == 0 else -np.stack(parts)
    return rule


if _signal is not None:
    defjvp(_signal.lfilter, *(_lfilter_jvp(k) for k in range(3)), ZERO, ZERO)
    defvjp(_signal.lfilter, *(_lfilter_vjp(k) for k in range(3)), ZERO, ZERO)
    for _fn, _correlates in ((_signal.convolve, False), (_signal.correlate, True)):
        defjvp(_fn, _bilinear_jvp(_fn, 0), _bilinear_jvp(_fn, 1), ZERO, ZERO)
        defvjp(_fn, _convolve_vjp(0, _correlates), _convolve_vjp(1, _correlates), ZERO, ZERO)
    for _fn, _correlates in ((_signal.convolve2d, False), (_signal.correlate2d, True)):
        defjvp(_fn, *(_zero_boundary(_fn, _bilinear_jvp(_fn, k)) for k in (0, 1)),
               ZERO, ZERO, ZERO)
        defvjp(_fn, *(_zero_boundary(_fn, _convolve_vjp(k, _correlates, ceil=_correlates))
                      for k in (0, 1)), ZERO, ZERO, ZERO)
