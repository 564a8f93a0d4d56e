"""Rules for ``np.fft`` (and ``scipy.fft``'s same functions): fft, ifft, rfft, irfft, hfft,
ihfft and their 2-d and n-d forms, fftshift, ifftshift.

Abbreviations: ``x`` the transformed array, ``out`` the primal output, ``dx`` a tangent with
leading batch dimensions, ``ct`` a cotangent, ``axes``/``sizes`` the transformed axes and the
lengths (``n``/``s``) they are transformed at, as NumPy resolves them.

Conventions:

- Every transform is (real-)linear, so a forward rule is the transform of the tangent (on
  negative axes, so that batch dimensions ride along).
- Reverse rules are plain transposes under ``Re(sum(a * b))`` (autograd/JAX): the DFT matrix is
  symmetric, so the transpose of ``fftn`` is ``fftn`` (likewise ``ifftn``, any ``norm``),
  followed by the transpose of the zero-padding/cropping to ``n``.  ``rfft*`` are ``fft*`` of a
  real input cropped to half the last axis; ``irfft*`` count each interior frequency twice
  (``c = [1, 2, ..., 2, (1)]``) and drop the imaginary parts of the self-conjugate ones, which
  is what their transposes do; ``hfft``/``ihfft`` are conjugated ``irfft``/``rfft``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rules import defjvp, defvjp
from ._common import neg_axes

_SWAP = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _resolve(x: Any, s: Any, axes: Any, kind: Any, one_d: Any) -> Any:
    """(positive axes, sizes) of a transform of ``x``, resolved as NumPy does.  ``kind`` is
    ``"c"`` (complex), ``"r"`` (rfft: real input), ``"i"`` (irfft/hfft: Hermitian input)."""
    nd = np.ndim(x)
    if one_d:
        axes = [int(axes) % nd]
        s = None if s is None else [s]
    elif axes is None:
        axes = list(range(nd)) if s is None else list(range(nd - len(s), nd))
    else:
        axes = [int(a) % nd for a in axes]
    if s is None:
        sizes = [np.shape(x)[a] for a in axes]
        if kind == "i":
            sizes[-1] = 2 * (sizes[-1] - 1)
    else:
        sizes = [np.shape(x)[a] if n is None or n == -1 else int(n) for a, n in zip(axes, s)]
    return axes, sizes


def _resize(g: Any, axes: Any, sizes: Any) -> Any:
    """Crop or zero-pad ``g`` along ``axes`` to ``sizes``."""
    for ax, n in zip(axes, sizes):
        have = np.shape(g)[ax]
        if have > n:
            g = np.take(g, np.arange(n), axis=ax)
        elif have < n:
            pad = [(0, 0)] * np.ndim(g)
            pad[ax] = (0, n - have)
            g = np.pad(g, pad)
    return g


def _hermitian_weights(n: Any, m: Any) -> Any:
    """c_k for k < m = n // 2 + 1: 1 for the self-conjugate frequencies, else 2."""
    c = np.full(m, 2.0)
    c[0] = 1.0
    if n % 2 == 0:
        c[-1] = 1.0
    return c


def _c2c_vjp(ct: Any, x: Any, axes: Any, sizes: Any, norm: Any, inverse: Any) -> Any:
    transform = np.fft.ifftn if inverse else np.fft.fftn
    g = transform(ct, axes=axes, norm=norm)
    return _resize(g, axes, [np.shape(x)[a] for a in axes])


def _r2c_vjp(ct: Any, x: Any, axes: Any, sizes: Any, norm: Any) -> Any:
    """Transpose of rfftn: pad the half spectrum, fftn, crop/pad to x, keep the real part."""
    full = _resize(ct, axes[-1:], sizes[-1:])
    g = np.fft.fftn(full, axes=axes, norm=norm)
    return np.real(_resize(g, axes, [np.shape(x)[a] for a in axes]))


def _c2r_vjp(ct: Any, x: Any, axes: Any, sizes: Any, norm: Any) -> Any:
    """Transpose of irfftn: c * ifftn(ct) on the half spectrum, then crop/pad to x."""
    n = sizes[-1]
    m = n // 2 + 1
    g = np.fft.ifftn(ct, axes=axes, norm=norm)
    g = np.take(g, np.arange(m), axis=axes[-1])
    shape = [1] * np.ndim(g)
    shape[axes[-1]] = m
    g = g * np.reshape(_hermitian_weights(n, m), shape)
    return _resize(g, axes, [np.shape(x)[a] for a in axes])


def _register(fn: Any, kind: Any, one_d: Any, inverse: Any = False,
              default_axes: Any = None) -> None:
    def split(args: Any, kwargs: Any) -> Any:
        """(s or n, axes or axis, norm) from the call, NumPy's positional order."""
        names = ("n", "axis", "norm") if one_d else ("s", "axes", "norm")
        defaults = (None, -1, None) if one_d else (None, default_axes, None)
        vals = list(defaults)
        for k, v in enumerate(args[:3]):
            vals[k] = v
        for k, name in enumerate(names):
            if name in kwargs:
                vals[k] = kwargs[name]
        return vals

    def jvp(dx: Any, out: Any, /, x: Any, *args: Any, **kwargs: Any) -> Any:
        s, axes, norm = split(args, kwargs)
        ax, sizes = _resolve(x, s, axes, kind, one_d)
        nd = np.ndim(x)
        neg = [a - nd for a in ax]
        if one_d:
            return fn(dx, sizes[0], neg[0], norm)
        return fn(dx, sizes, neg, norm)

    def vjp(ct: Any, out: Any, /, x: Any, *args: Any, **kwargs: Any) -> Any:
        s, axes, norm = split(args, kwargs)
        ax, sizes = _resolve(x, s, axes, kind, one_d)
        if fn.__name__ == "hfft":  # hfft(a) = irfft(conj(a), norm swapped)
            return np.conj(_c2r_vjp(ct, x, ax, sizes, _SWAP[norm]))
        if fn.__name__ == "ihfft":  # ihfft(a) = conj(rfft(a, norm swapped))
            return _r2c_vjp(np.conj(ct), x, ax, sizes, _SWAP[norm])
        if kind == "c":
            return _c2c_vjp(ct, x, ax, sizes, norm, inverse)
        if kind == "r":
            return _r2c_vjp(ct, x, ax, sizes, norm)
        return _c2r_vjp(ct, x, ax, sizes, norm)
    defjvp(fn, jvp)
    defvjp(fn, vjp)


# name -> (kind, one-dimensional, inverse, default axes)
_TRANSFORMS = {
    "fft": ("c", True, False, None), "ifft": ("c", True, True, None),
    "rfft": ("r", True, False, None), "irfft": ("i", True, False, None),
    "hfft": ("i", True, False, None), "ihfft": ("r", True, False, None),
    "fft2": ("c", False, False, (-2, -1)), "ifft2": ("c", False, True, (-2, -1)),
    "rfft2": ("r", False, False, (-2, -1)), "irfft2": ("i", False, False, (-2, -1)),
    "fftn": ("c", False, False, None), "ifftn": ("c", False, True, None),
    "rfftn": ("r", False, False, None), "irfftn": ("i", False, False, None)}


def _shift_axes(x: Any, axes: Any) -> Any:
    return neg_axes(axes, np.ndim(x))


def _register_module(module: Any) -> None:
    """The transforms and shifts of ``module`` (``np.fft``; ``scipy.fft``, the same transforms
    by its own implementation, whose further arguments -- ``overwrite_x``, ``workers`` --
    do not change the numbers)."""
    for name, (kind, one_d, inverse, default_axes) in _TRANSFORMS.items():
        _register(getattr(module, name), kind, one_d, inverse, default_axes)
    defjvp(module.fftshift, lambda dx, out, /, x, axes=None:
           np.fft.fftshift(dx, _shift_axes(x, axes)))
    defvjp(module.fftshift, lambda ct, out, /, x, axes=None: np.fft.ifftshift(ct, axes))
    defjvp(module.ifftshift, lambda dx, out, /, x, axes=None:
           np.fft.ifftshift(dx, _shift_axes(x, axes)))
    defvjp(module.ifftshift, lambda ct, out, /, x, axes=None: np.fft.fftshift(ct, axes))


_register_module(np.fft)
try:
    import scipy.fft as _scipy_fft
except ImportError:  # pragma: no cover - overdub_ad works without SciPy
    _scipy_fft = None
if _scipy_fft is not None:
    _register_module(_scipy_fft)
