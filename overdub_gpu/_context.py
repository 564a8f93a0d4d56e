"""Array-backend contexts: run NumPy/``math`` code on another array namespace, unchanged.

``ArrayBackendContext(xp)`` registers one primitive per NumPy callable (and per ``math``
function).  Each looks its callable up in the swap table (:mod:`overdub_gpu._table`: the
backend's own table first, then the array-API default) and calls the counterpart in ``xp``; the
lookup is done once per callable and context, then cached in the context's :class:`Backend`.
``GPUContext`` is ``ArrayBackendContext(cupy)`` with a device check.

Nothing crosses between host and device behind the user's back: ``to_device`` and ``to_host``
are the only transfers (plus ``numpy.asarray(host_data)`` inside the context, which *is* an
upload), a NumPy array passed where the namespace expects its own arrays is a
:class:`HostArrayError`, and a NumPy function with no counterpart is a
:class:`MissingCounterpartError` unless ``host_fallback=True`` asks for host computation.
"""

from __future__ import annotations

import contextvars
import functools
import math
import operator
import os
import sys
import types
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from typing_extensions import Self

from overdub import Context, Tagged, current_context, opaque

from . import _table
from ._table import MissingCounterpartError, Rule
from ._float32 import Float32Literals

__all__ = ["ArrayBackendContext", "GPUContext", "to_device", "to_host", "HostArrayError",
           "EnclosingTagError", "GPUUnavailableError", "ViewWriteError", "Backend"]


class HostArrayError(TypeError):
    """A NumPy (host) array reached a function that computes in another array namespace."""


class EnclosingTagError(TypeError):
    """A value tagged by an enclosing context (a derivative taken outside the array-backend
    context) reached a NumPy function this context computes in another namespace."""


class GPUUnavailableError(RuntimeError):
    """``GPUContext()`` could not find CuPy or a CUDA device."""


class ViewWriteError(TypeError):
    """A write into a Dask array that NumPy would have seen through a view (or a view would
    have seen): Dask arrays share no memory, so the write would reach one of them only."""


_NUMPY_LIKE = ("numpy", "cupy", "dask.array")  # take NumPy dtypes and Python scalars as-is
_DTYPE_ARGS = (type, np.dtype, str)


def _unknown(v: Any) -> bool:
    """Whether ``v`` is, or holds, a shape with an unknown (NaN) length: a Dask array indexed
    with a boolean mask, its shape, or a list of them."""
    shape = getattr(v, "shape", v)
    if isinstance(shape, (tuple, list)):
        return any(isinstance(n, float) and n != n or
                   isinstance(n, (tuple, list)) and _unknown(n) or
                   hasattr(n, "shape") and _unknown(n) for n in shape)
    return False


def _naming_unknown_shapes(label: str, call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` on Dask, its failure on an array of unknown shape said as such: a boolean mask
    (``x[mask]``) makes one, and derivatives through it (the cotangent of ``np.sum(x[mask])``,
    say) need the lengths Dask does not know until it computes."""
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except (ValueError, TypeError) as error:
            if not any(map(_unknown, (*args, *kwargs.values()))):
                raise
            raise ValueError(
                f"{label} got a Dask array of unknown shape: indexing a Dask array with a "
                f"boolean mask (x[mask]) gives one, and what follows it (np.sum(x[mask]), "
                f"its derivative) needs the lengths Dask knows only after computing: select "
                f"with np.where(mask, x, 0.0) instead ({error})") from error
    return run


class Backend:
    """What a context knows about its array namespace ``xp``, and its cache of swaps.

    Attributes (set once, never reset): ``xp``; ``name`` (``xp.__name__``); ``table`` (the
    backend's own swap table, empty for a namespace without one); ``numpy_like`` (takes NumPy
    dtypes and Python scalars as NumPy does); ``float32``; ``host_fallback``; ``runners``
    (``id(numpy callable) -> callable`` doing the swap, filled on first use).
    """

    def __init__(self, xp: Any, float32: bool, host_fallback: bool) -> None:
        self.xp = xp
        self.name = getattr(xp, "__name__", type(xp).__name__)
        self.is_numpy = xp is np
        self.numpy_like = self.name in _NUMPY_LIKE
        self.table = _table.BACKENDS.get(self.name, {})
        self.float32 = float32
        self.host_fallback = host_fallback
        self.runners: dict[int, Callable[..., Any]] = {}
        self._array_types: tuple[type, ...] | None = None
        if not self.is_numpy:
            seal(self.name.split(".")[0])
            if self.name != "cupy":  # (CuPy refuses implicit copies itself)
                _guard_conversions(self)
        if self.name == "dask.array":
            _register_dask_writes(xp.Array)

    # -- arrays and dtypes -----------------------------------------------------------------
    @property
    def array_types(self) -> tuple[type, ...]:
        if self._array_types is None:
            if self.is_numpy:
                found: tuple[type, ...] = (np.ndarray, np.generic)
            else:
                kinds = [t for t in (getattr(self.xp, "ndarray", None),
                                     getattr(self.xp, "Array", None)) if isinstance(t, type)]
                found = tuple(kinds) or (type(self.xp.asarray(0)),)
            self._array_types = found
        return self._array_types

    def is_array(self, x: Any) -> bool:
        return isinstance(x, self.array_types)

    def resolve_name(self, dotted: str) -> Any:
        """``xp.<dotted>``; AttributeError when ``xp`` lacks it."""
        obj = self.xp
        for part in dotted.split("."):
            obj = getattr(obj, part)
        return obj

    def dtype(self, d: Any) -> Any:
        """NumPy's spelling of a dtype (``np.float32``, ``float``, ``"f4"``) in ``xp``."""
        if d is None or self.numpy_like or not isinstance(d, _DTYPE_ARGS):
            return d
        name = np.dtype(d).name
        try:
            return self.resolve_name(name)
        except AttributeError:
            raise MissingCounterpartError(f"dtype {name} has no counterpart in {self.name}") \
                from None

    def astype(self, x: Any, d: Any) -> Any:
        d = self.dtype(d)
        astype = getattr(self.xp, "astype", None)
        return astype(x, d) if astype is not None and not self.name == "dask.array" \
            else x.astype(d)

    def arrays(self, values: tuple[Any, ...], like: Any = None) -> tuple[Any, ...]:
        """``values`` with Python/NumPy scalars and lists as ``xp`` arrays (strict namespaces).

        A scalar next to an array takes the array's dtype when it is of the same kind or
        narrower (NumPy's "weak scalar" rule), so ``maximum(x32, 0.5)`` stays float32.
        """
        if self.numpy_like:
            return values
        if like is None:
            like = next((v for v in values if self.is_array(v)), None)
        return tuple(v if self.is_array(v) else self._scalar_array(v, like) for v in values)

    def promoted(self, arrays: tuple[Any, ...]) -> tuple[Any, ...]:
        """The operands ``arrays`` of an elementwise function, promoted across kinds as NumPy
        does (an integer array with a float one gives floats): the array API leaves that
        undefined and a strict namespace refuses it."""
        if self.numpy_like or len(arrays) < 2:
            return arrays
        dtypes = {a.dtype for a in arrays if self.is_array(a)}
        if len(dtypes) < 2:
            return arrays
        try:
            self.xp.result_type(*dtypes)
            return arrays  # the namespace promotes them itself
        except TypeError:
            pass
        target = self.dtype(np.result_type(*[self.numpy_dtype(d) for d in dtypes]))
        return tuple(self.astype(a, target) if self.is_array(a) and a.dtype != target else a
                     for a in arrays)

    def numpy_dtype(self, d: Any) -> np.dtype[Any]:
        """NumPy's dtype of the same name as ``xp``'s dtype ``d``."""
        for name in _DTYPE_NAMES:
            if getattr(self.xp, name, None) == d:
                return np.dtype(name)
        raise TypeError(f"{self.name} dtype {d!r} has no NumPy counterpart")

    def _scalar_array(self, v: Any, like: Any) -> Any:
        if isinstance(v, np.generic):
            v = v.item()
        if like is not None and isinstance(v, (bool, int, float, complex)):
            kind = _kind(like.dtype, self.xp)
            if kind is not None and _SCALAR_RANK[type(v)] <= _KIND_RANK[kind]:
                return self.xp.asarray(v, dtype=like.dtype)
        if self.float32 and type(v) is float:
            return self.xp.asarray(v, dtype=self.xp.float32)
        return self.xp.asarray(v)

    def python_scalar(self, v: Any, dtype: Any) -> tuple[Any, Any]:
        """``(v as a Python number, dtype)`` for functions that take Python numbers only: a 0-d
        array (a float32 literal) gives its value, and its dtype unless one was given."""
        if isinstance(v, np.generic):
            return v.item(), dtype if dtype is not None else v.dtype
        if self.is_array(v) and not self.numpy_like and getattr(v, "ndim", None) == 0:
            kind = _kind(v.dtype, self.xp)
            convert = {"bool": bool, "integral": int, "real floating": float}.get(
                kind or "", complex)
            return convert(v), dtype if dtype is not None else v.dtype
        return v, dtype

    # -- moving data -------------------------------------------------------------------------
    def upload(self, a: Any) -> Any:
        if self.is_array(a):
            return a
        if self.name == "dask.array" and isinstance(a, np.ndarray):
            return self.xp.from_array(a)
        if isinstance(a, np.generic):
            if self.numpy_like:
                return self.xp.asarray(np.asarray(a))
            return self.xp.asarray(a.item(), dtype=self.dtype(a.dtype))
        return self.xp.asarray(a)

    def download(self, a: Any) -> Any:
        if isinstance(a, (np.ndarray, np.generic)) or not self.is_array(a):
            return a
        token = _EXPLICIT.set(True)  # asked for: the conversion guards let it through
        try:
            return self._download(a)
        finally:
            _EXPLICIT.reset(token)

    def _download(self, a: Any) -> Any:
        if self.name == "cupy":
            return a.get()
        if self.name == "dask.array":
            return np.asarray(a.compute())
        try:
            return np.array(np.from_dlpack(a))  # the array API's way across namespaces
        except (TypeError, ValueError, AttributeError, BufferError, RuntimeError):
            return np.asarray(a)

    # -- the swap ----------------------------------------------------------------------------
    def runner(self, fn: Any, label: str) -> Callable[..., Any]:
        """The callable that runs ``fn`` in this backend (built once, then cached)."""
        run = self.runners.get(id(fn))
        if run is None:
            run = self.runners[id(fn)] = self._build(fn, label)
        return run

    def _lookup(self, fn: Any) -> tuple[Rule | None, Any, list[str]]:
        """(rule, xp callable or None, the names looked for)."""
        looked = []
        for table in (self.table, _table.DEFAULT):
            rule = table.get(fn)
            if rule is None:
                continue
            looked.append(f"{self.name}.{rule.name}")
            try:
                return rule, self.resolve_name(rule.name), looked
            except AttributeError:
                continue
        return None, None, looked

    def _build(self, fn: Any, label: str) -> Callable[..., Any]:
        is_math = label.startswith("math.")
        call: Callable[..., Any]
        if self.is_numpy and not is_math:
            rule = _table.CUPY.get(fn) or _table.DEFAULT.get(fn)
            f, call = fn, fn                        # NumPy is its own counterpart
            kind = rule.kind if rule is not None else "call"
        else:
            rule, f, looked = self._lookup(fn)
            if rule is None or f is None:  # f is None whenever rule is
                return self._missing(fn, label, looked)
            kind = rule.kind
            call = f if rule.adapt is None else functools.partial(rule.adapt, f, self)
        if not self.is_numpy and kind in ("call", "elementwise") and \
                label[len("numpy."):] not in _SEQUENCE_FIRST:
            call = self._lists_as_arrays(call, kind == "elementwise")
        if not self.numpy_like and not is_math and kind != "upload":
            call = self._promoting(fn, label, call)
        if self.float32:
            call = self._float32_default(fn, call)
            if fn is np.float32 or fn is np.complex64:
                call = _literal(call)
        if kind == "math":
            return self._for_arrays_only(fn, call)
        if not self.is_numpy and kind not in ("upload", "creation", "random"):
            call = self._refusing_host_arrays(label, call)
        if self.name == "dask.array" and label[len("numpy."):] in _VIEW_FUNCTIONS:
            call = self._recording_views(label, call)
        if self.name == "dask.array":
            call = _naming_unknown_shapes(label, call)
        return call

    def _recording_views(self, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` recording its result as a view of its argument, as NumPy's would be."""
        kinds = self.array_types
        each = label == "numpy.broadcast_arrays"

        def run(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            if each:
                for view, base in zip(out, args):
                    _record_views(view, base, kinds)
            elif args:
                _record_views(out, args[0], kinds)
            return out
        return run

    def _for_arrays_only(self, fn: Any, call: Callable[..., Any]) -> Callable[..., Any]:
        is_array = self.is_array

        def run(*args: Any, **kwargs: Any) -> Any:
            for a in args:
                if is_array(a):
                    return call(*args, **kwargs)
            return fn(*args, **kwargs)  # Python numbers: the math function itself
        return run

    def _refusing_host_arrays(self, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        name = self.name

        def run(*args: Any, **kwargs: Any) -> Any:
            for i, a in enumerate(args):
                if type(a) is np.ndarray or (type(a) in (list, tuple) and any(
                        type(v) is np.ndarray for v in a)):
                    raise HostArrayError(
                        f"{label} got a NumPy (host) array as argument {i} inside an "
                        f"ArrayBackendContext({name}): move it with to_device(ctx, a) first "
                        f"(nothing is copied between host and device implicitly)")
            for key, a in kwargs.items():
                if type(a) is np.ndarray:
                    raise HostArrayError(
                        f"{label} got a NumPy (host) array as {key}= inside an "
                        f"ArrayBackendContext({name}): move it with to_device(ctx, a) first")
            return call(*args, **kwargs)
        return run

    def _lists_as_arrays(self, call: Callable[..., Any], every: bool) -> Callable[..., Any]:
        """``call`` taking a list (or tuple) of numbers or arrays where NumPy takes an array
        (``np.sum([1.0, 2.0])``, ``np.max([v[0], v[1]])``): the first argument (``every``: each
        positional one, as ufuncs take them) made one array, as NumPy makes it."""
        be = self

        def as_array(a: Any) -> Any:
            if type(a) not in (list, tuple):
                return a
            stacked = _table._stacked(be, a)
            return stacked if be.is_array(stacked) else be.xp.asarray(stacked)

        def run(*args: Any, **kwargs: Any) -> Any:
            if args and (type(args[0]) in (list, tuple) or every):
                args = tuple(map(as_array, args)) if every else (as_array(args[0]), *args[1:])
            return call(*args, **kwargs)
        return run

    def _promoting(self, fn: Any, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` promoting integer and boolean arrays as NumPy does where a strict namespace
        refuses them (``np.sqrt(2)``, ``np.mean(ints)``, ``np.divide(ints, 2)``): on its
        TypeError, NumPy's own function run on one-element arrays of the same dtypes says
        which float type NumPy computes in, and the call is made again with those arrays
        cast to it."""
        be = self

        def exact(a: Any) -> bool:
            return be.is_array(a) and _kind(a.dtype, be.xp) in ("bool", "integral")

        def stand_in(a: Any) -> Any:
            if be.is_array(a):
                return np.ones((1,) * a.ndim, dtype=be.numpy_dtype(a.dtype))
            if type(a) in (list, tuple):
                return type(a)(stand_in(v) for v in a)
            return a

        def cast(a: Any, target: Any) -> Any:
            if exact(a):
                return be.astype(a, target)
            if type(a) in (list, tuple):
                return type(a)(cast(v, target) for v in a)
            return a

        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except TypeError as error:
                mixed = [*args, *kwargs.values()]
                if not any(exact(a) or type(a) in (list, tuple) and any(map(exact, a))
                           or isinstance(a, (bool, int)) for a in mixed):
                    raise
                try:
                    with np.errstate(all="ignore"), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        want = np.result_type(fn(*map(stand_in, args), **{
                            k: stand_in(v) for k, v in kwargs.items()}))
                except Exception:
                    raise error from None
                if want.kind not in "fc" and not (want.kind in "iu" and any(
                        be.is_array(a) and _kind(a.dtype, be.xp) == "bool" for a in args)):
                    raise  # (np.cumsum(mask): NumPy counts booleans as integers)
                try:
                    target = be.dtype(want)
                except MissingCounterpartError:
                    raise MissingCounterpartError(
                        f"{label} computes in {want.name} with these arguments in NumPy, "
                        f"which has no counterpart in {be.name}: cast them first "
                        f"(x.astype(np.float32))") from error
                if not any(be.is_array(a) for a in args):  # np.sqrt(2): numbers only
                    args = tuple(be.xp.asarray(a, dtype=target)
                                 if isinstance(a, (bool, int, np.integer, np.bool_)) else a
                                 for a in args)
                return call(*(cast(a, target) for a in args),
                            **{k: cast(v, target) for k, v in kwargs.items()})
        return run

    def _float32_default(self, fn: Any, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` with float32 (complex64) as the default float type, as JAX without x64:
        a float64 (complex128) result that NumPy chose by default -- from integers, booleans
        or Python numbers (``np.sqrt(2)``, ``np.mean(mask)``, ``np.zeros(3)``) -- is narrowed;
        one that an argument was already (a float64 array, ``np.float64(v)``) or a ``dtype``
        asked for is kept."""
        narrower = {}
        for big, small in (("float64", "float32"), ("complex128", "complex64")):
            try:
                narrower[self.dtype(np.dtype(big)) if not self.numpy_like else np.dtype(big)] \
                    = small
            except MissingCounterpartError:
                pass
        if isinstance(fn, type):
            return call  # np.float64(v): the dtype asked for
        is_array = self.is_array

        def wide(a: Any) -> bool:
            if is_array(a) or isinstance(a, (np.ndarray, np.generic)):
                return getattr(a, "dtype", None) in narrower
            if type(a) in (list, tuple):
                return any(wide(v) for v in a)
            return False

        def narrowed(out: Any) -> Any:
            if isinstance(out, tuple) and not hasattr(out, "_fields"):
                return tuple(narrowed(o) for o in out)
            if isinstance(out, tuple):  # a named tuple (EighResult...)
                return type(out)(*(narrowed(o) for o in out))
            if isinstance(out, list):
                return [narrowed(o) for o in out]
            narrow = narrower.get(getattr(out, "dtype", None))
            if narrow is None or not (is_array(out) or isinstance(out, np.generic)):
                return out
            return out.astype(narrow) if self.numpy_like else self.astype(out, narrow)

        def run(*args: Any, **kwargs: Any) -> Any:
            out = call(*args, **kwargs)
            if _in_derivative_code():
                return out  # a derivative rule's constant: as precise as the data
            if "dtype" in kwargs or any(isinstance(a, _DTYPE_ARGS) and not isinstance(a, str)
                                        or isinstance(a, str) and _is_dtype_name(a)
                                        for a in args[1:]):
                return out  # a dtype the user asked for
            if any(wide(a) for a in args) or any(wide(a) for a in kwargs.values()):
                return out  # float64 data stays float64
            return narrowed(out)
        return run

    def _missing(self, fn: Any, label: str, looked: list[str]) -> Callable[..., Any]:
        if self.host_fallback:
            return self._on_host(fn)
        where = f"looked for {' and '.join(looked)}" if looked else "no rule in the swap table"
        name = self.name

        def run(*args: Any, **kwargs: Any) -> Any:
            if label.startswith("math.") and not any(self.is_array(a) for a in args):
                return fn(*args, **kwargs)
            raise MissingCounterpartError(
                f"{label} has no counterpart in {name} ({where}): register a primitive for it "
                f"on your context (@MyContext.primitive({label})), or allow computing it on "
                f"the host with ArrayBackendContext({name}, host_fallback=True)")
        return run

    def _on_host(self, fn: Any) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            out = fn(*_map(self.download, args), **dict(zip(kwargs, _map(
                self.download, tuple(kwargs.values())))))
            return _map(self.upload, out) if isinstance(out, (tuple, list)) else (
                self.upload(out) if isinstance(out, (np.ndarray, np.generic)) else out)
        return run


# -- implicit copies to the host -----------------------------------------------------------
# Code the context runs as written (a function without source, an opaque one) calls NumPy
# itself; NumPy then converts a namespace's arrays (``__array__``, the buffer protocol, Dask's
# fallback for functions it lacks) and computes on the host.  While a context of that
# namespace is the one running, those conversions raise instead, naming the code; to_host (and
# host_fallback=True) are the asked-for copies.

_EXPLICIT: contextvars.ContextVar[bool] = contextvars.ContextVar("overdub_gpu_explicit",
                                                                 default=False)
_guarded: set[type] = set()
_OWN_DIRS = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (np, sys.modules[
    "overdub"])) + (os.path.dirname(__file__) + os.sep,)
_AD_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "overdub_ad") + os.sep
_METADATA_ONLY = frozenset(getattr(np, n) for n in ("shape", "ndim", "size", "result_type")
                           if hasattr(np, n))


def _in_derivative_code() -> bool:
    """Whether the innermost code outside NumPy, overdub and this package that is running is
    overdub_ad's (a derivative rule, the sweep): its constants and the arrays it creates
    are not the user's, and ``float32=True`` leaves them as NumPy makes them -- Python floats
    and float64 arrays stay what they are, so float32 data give float32 derivatives (NumPy's
    promotion keeps them so) and float64 data are not rounded to float32."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_OWN_DIRS) or name.startswith("<overdub")):
            return name.startswith(_AD_DIR)
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _literal(call: Callable[..., Any]) -> Callable[..., Any]:
    """``numpy.float32(v)`` (as the float32 pass spells a literal), but ``v`` itself in
    derivative code (see :func:`_in_derivative_code`)."""
    def run(*args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and type(args[0]) in (float, complex) and \
                _in_derivative_code():
            return args[0]
        return call(*args, **kwargs)
    return run


def _guard_conversions(be: Backend) -> None:
    """Make implicit conversions of ``be``'s arrays to NumPy raise :class:`HostArrayError`
    inside a run of a context of ``be``'s namespace (outside one they work as before)."""
    for cls in be.array_types:
        if cls in _guarded:
            continue
        _guarded.add(cls)
        for attr in ("__array__", "__buffer__"):
            original = getattr(cls, attr, None)
            if callable(original):
                setattr(cls, attr, _refusing(be.name, original, attr))
        original = getattr(cls, "__array_function__", None)
        if be.name == "dask.array" and callable(original):
            setattr(cls, "__array_function__", _refusing_unhandled(be.name, original))


def _in_run_of(name: str) -> bool:
    ctx = current_context()
    return isinstance(ctx, ArrayBackendContext) and ctx.backend.name == name and \
        not ctx.host_fallback and not _EXPLICIT.get()


def _refusing(name: str, original: Any, attr: str) -> Any:
    @functools.wraps(original)
    def guard(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _in_run_of(name):
            error = _implicit_copy(name, f"an array of {name} was converted to a NumPy (host) "
                                         f"array ({attr})")
            if error is not None:
                raise error
        return original(self, *args, **kwargs)
    return opaque(guard)


def _refusing_unhandled(name: str, original: Any) -> Any:
    """Dask's ``__array_function__``, refusing NumPy functions Dask lacks (Dask would compute
    its arrays and call NumPy's) inside a run, as its own lookup finds them."""
    try:
        import dask.array as module  # noqa: PLC0415 (the dask extra)
        from dask.array.core import _HANDLED_FUNCTIONS as handled  # noqa: PLC0415
    except ImportError:  # another Dask: its own fallback is left as it is
        return original
    lacks: dict[Any, bool] = {}

    def lacked(func: Any) -> bool:
        found = lacks.get(func)
        if found is None:
            owner: Any = module
            for part in (getattr(func, "__module__", None) or "numpy").split(".")[1:]:
                owner = getattr(owner, part, None)
            target = getattr(owner, getattr(func, "__name__", ""), None)
            found = lacks[func] = (target is None or target is func) and func not in handled
        return found

    @functools.wraps(original)
    def guard(self: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func not in _METADATA_ONLY and lacked(func) and _in_run_of(name):
            error = _implicit_copy(name, f"{func.__module__}.{func.__name__}, which {name} "
                                         f"lacks, got an array of {name}")
            if error is not None:
                raise error
        return original(self, func, types, args, kwargs)
    return opaque(guard)


def _implicit_copy(name: str, what: str) -> HostArrayError | None:
    """The error for an implicit copy, naming the innermost code outside NumPy, overdub and
    the namespace that made it (the code overdub ran as written); None where that code is a
    derivative's own, run by a derivative taken outside the context (whose next NumPy call
    raises :class:`EnclosingTagError`)."""
    package = os.path.dirname(sys.modules[name.split(".")[0]].__file__ or "") + os.sep
    skip = (*_OWN_DIRS, package, "<overdub")
    frame = sys._getframe(2)
    own = swapped = False  # whether the namespace's code converts, called by the swap
    dispatched = False  # whether rewritten code called what converts (not code run as written)
    here = os.path.dirname(__file__) + os.sep
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        own = own or frame.f_code.co_filename.startswith(package)
        swapped = swapped or own and frame.f_code.co_filename.startswith(here)
        dispatched = dispatched or frame.f_code.co_filename.startswith("<overdub")
        frame = frame.f_back  # type: ignore[assignment]
    code = None if frame is None else frame.f_code
    if code is not None and code.co_filename.startswith(_AD_DIR):
        return None  # a derivative taken outside the context: EnclosingTagError's business
    where = "code" if frame is None or code is None else (
        f"{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename}, line "
        f"{frame.f_lineno})")
    if swapped and code is not None:
        return HostArrayError(
            f"{what} inside ArrayBackendContext({name}), by {name}'s own code for a NumPy "
            f"call in {where}: {name} itself would compute that array on the host (with "
            f"these arguments its function converts them to NumPy arrays); pass NumPy values "
            f"it takes as they are (numbers rather than arrays, where NumPy takes both), or "
            f"copy explicitly with to_host(ctx, a) (nothing is copied between host and "
            f"device implicitly)")
    if dispatched and code is not None:
        return HostArrayError(
            f"{what} inside ArrayBackendContext({name}), by a call in {where} that runs "
            f"natively, unswapped (a NumPy utility such as np.shares_memory or "
            f"np.may_share_memory, x.__array__(), a C function given the array): NumPy "
            f"would convert the array and compute on the host; copy explicitly with "
            f"to_host(ctx, a) (nothing is copied between host and device implicitly)")
    return HostArrayError(
        f"{what} inside ArrayBackendContext({name}), in {where}: overdub runs that code as "
        f"written (it has no source, or is opaque), so its NumPy calls are not swapped and "
        f"NumPy would compute on the host; give it source (a function defined in a file), "
        f"register a primitive for it, or copy explicitly with to_host(ctx, a) "
        f"(nothing is copied between host and device implicitly)")


_sealed: set[str] = set()


def seal(package: str) -> None:
    """Mark the functions and methods of ``package`` (the namespace's own code) ``opaque``.

    A namespace written in Python (``array_api_strict``, ``dask``) implements its arrays with
    NumPy.  Recursing into that code would swap its own NumPy calls for itself; as leaves, its
    functions and array methods run exactly as written.  Modules imported after a context was
    made are sealed when the next context is made.
    """
    for name, module in list(sys.modules.items()):
        if module is None or name in _sealed or not (
                name == package or name.startswith(package + ".")):
            continue
        _sealed.add(name)
        for obj in list(vars(module).values()):
            if isinstance(obj, types.FunctionType) and _owned(obj, package):
                opaque(obj)
            elif isinstance(obj, type) and _owned(obj, package):
                for klass in obj.__mro__[:-1]:
                    if not _owned(klass, package):
                        continue  # a base from elsewhere (the standard library...): not ours
                    for attr in list(vars(klass).values()):
                        for fn in (attr, getattr(attr, "__func__", None),
                                   getattr(attr, "fget", None), getattr(attr, "fset", None)):
                            if isinstance(fn, types.FunctionType) and _owned(fn, package):
                                opaque(fn)


def _owned(obj: Any, package: str) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == package


def _is_dtype_name(s: str) -> bool:
    try:
        np.dtype(s)
    except TypeError:
        return False
    return True


_DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                "uint64", "float32", "float64", "complex64", "complex128")
_SCALAR_RANK = {bool: 0, int: 1, float: 2, complex: 3}
_KIND_RANK = {"bool": 0, "integral": 1, "real floating": 2, "complex floating": 3}


def _kind(dtype: Any, xp: Any) -> str | None:
    isdtype = getattr(xp, "isdtype", None)
    if isdtype is None:
        return None
    for kind in ("bool", "integral", "real floating", "complex floating"):
        if isdtype(dtype, kind):
            return kind
    return None


def _tagged(values: Iterable[Any]) -> bool:
    return any(type(v) is Tagged for v in values)


def _innermost(x: Any) -> Any:
    while type(x) is Tagged:
        x = x.value
    return x


def _map(f: Callable[[Any], Any], value: Any) -> Any:
    """``f`` over arrays in (nested) tuples, lists and dicts."""
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map(f, v) for v in value)
    if isinstance(value, tuple):  # a named tuple (SVDResult...)
        return type(value)(*(_map(f, v) for v in value))
    if isinstance(value, list):
        return [_map(f, v) for v in value]
    if isinstance(value, dict):
        return {k: _map(f, v) for k, v in value.items()}
    return f(value)


class ArrayBackendContext(Context):
    """``ArrayBackendContext(xp, float32=False, host_fallback=False, *, metadata=None,
    passes=())``: run NumPy and scalar ``math`` code with the array namespace ``xp``.

    Inside ``overdub(ctx, f, ...)`` every NumPy function ``f`` calls (array creation, ufuncs,
    reductions, shape ops, ``linalg``, ``fft``, ``random``, ``where``, ``einsum``, ``matmul``)
    runs as its counterpart in ``xp``, and ``math`` functions called with an ``xp`` array do
    too; operators on ``xp`` arrays (``a @ b``, ``a * 2``) are the arrays' own.  ``xp`` may be
    ``numpy``, ``cupy``, ``dask.array``, ``array_api_strict`` or any array-API namespace.
    ``float32=True`` keeps float32 data float32: float literals become float32 (the
    :class:`~overdub_gpu.Float32Literals` pass) and arrays created without a dtype are float32.
    A NumPy function with no counterpart raises :class:`MissingCounterpartError` unless you
    register a primitive for it or pass ``host_fallback=True`` (then it runs on the host, with
    its arguments copied there and its result copied back).

    Example::

        import array_api_strict as xp
        ctx = ArrayBackendContext(xp)
        out = overdub(ctx, lambda: np.linspace(0, 1, 5) ** 2)   # an array_api_strict array

    See also: :class:`GPUContext`, :func:`to_device`, :func:`to_host`, :func:`broadcast`.
    """

    def __init__(self, xp: Any, float32: bool = False, host_fallback: bool = False, *,
                 metadata: Any = None, passes: Any = ()) -> None:
        if not hasattr(xp, "asarray"):
            raise TypeError(f"ArrayBackendContext(xp): xp must be an array namespace such as "
                            f"numpy, cupy or array_api_strict, got {xp!r}")
        try:
            passes = tuple(passes)
        except TypeError:
            raise TypeError(f"{type(self).__name__}(passes=...) takes a list of passes, "
                            f"got {passes!r}") from None
        if float32 and not any(isinstance(p, Float32Literals) for p in passes):
            passes = (*passes, Float32Literals())
        super().__init__(metadata=metadata, passes=passes)
        self.xp = xp
        self.float32 = bool(float32)
        self.host_fallback = bool(host_fallback)
        self.backend = Backend(xp, self.float32, self.host_fallback)

    def __repr__(self) -> str:
        extra = "".join(f", {k}=True" for k in ("float32", "host_fallback") if getattr(self, k))
        return f"{type(self).__name__}({self.backend.name}{extra})"

    def similar(self, *args: Any, **kwargs: Any) -> Self:
        sibling = super().similar(*args, **kwargs)
        for name in ("_overdub_gpu__Broadcasting", "_overdub_gpu__Checking"):
            sibling.__dict__.pop(name, None)
        return sibling

    def _run(self, fn: Any, label: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run NumPy's ``fn`` as its counterpart in ``xp`` (every primitive comes here)."""
        return self.backend.runner(fn, label)(*args, **kwargs)

    def _enclosing_tags(self, fn: Any, label: str, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
        """A call given values that an enclosing context tagged (``grad`` taken outside this
        context): the counterpart would see plain values and drop the tags (a derivative
        would silently be zero).  With NumPy, ``fn`` is its own counterpart, and ``math`` on
        Python numbers is ``math``'s: the enclosing context runs it, tags and all.  Otherwise
        the enclosing context would compute on the host, so this is an error naming the
        nesting that works."""
        if self.backend.is_numpy or (label.startswith("math.") and not any(
                self.backend.is_array(_innermost(a)) for a in args)):
            return self.fallback(fn, *args, **kwargs)
        name = self.backend.name
        raise EnclosingTagError(
            f"{label} got a value tagged by an enclosing context (a derivative such as grad "
            f"taken outside ArrayBackendContext({name})): the enclosing context's own "
            f"computations (derivative rules included) would run on the host, outside "
            f"{name}; take the derivative inside the context instead, "
            f"overdub(ctx, grad(f), x), so that both run on {name}")


def _swap(fn: Any, label: str) -> Callable[..., Any]:
    def swap(ctx: ArrayBackendContext, /, *args: Any, **kwargs: Any) -> Any:
        for a in args:
            if type(a) is Tagged or (type(a) in (list, tuple) and _tagged(a)):
                return ctx._enclosing_tags(fn, label, args, kwargs)
        if kwargs and _tagged(kwargs.values()):
            return ctx._enclosing_tags(fn, label, args, kwargs)
        return ctx._run(fn, label, args, kwargs)
    swap.__name__ = swap.__qualname__ = f"swap[{label}]"
    return opaque(swap)


# One primitive per NumPy callable and per math function: swapped where the table has a
# counterpart, a clear error (or host fallback) where it has none.
for _label, _fn in (*_table.numpy_callables(), *_table.math_callables()):
    ArrayBackendContext.primitive(_fn)(_swap(_fn, _label))
del _label, _fn


def _generator_method(cls: type, name: str) -> Any:
    label = f"numpy.random.{cls.__name__}.{name}"
    method = getattr(cls, name)

    @opaque
    def run(ctx: ArrayBackendContext, generator: Any, /, *args: Any, **kwargs: Any) -> Any:
        be = ctx.backend
        if be.is_numpy:
            return method(generator, *args, **kwargs)
        if be.host_fallback:
            return be._on_host(functools.partial(method, generator))(*args, **kwargs)
        raise MissingCounterpartError(
            f"{label} has no counterpart in {be.name}: a NumPy generator (made outside the "
            f"context, or passed in) makes NumPy (host) arrays; make it inside the context "
            f"(np.random.default_rng(seed), np.random.seed(seed) and np.random's functions are "
            f"swapped where {be.name} has them), or allow host computation with "
            f"ArrayBackendContext({be.name}, host_fallback=True)")
    return run


# The methods of NumPy's generators made outside the context (rng = np.random.default_rng(0),
# passed in): they make NumPy arrays, so they are refused as the generator classes are.
for _cls in (np.random.Generator, np.random.RandomState):
    for _name in dir(_cls):
        if not _name.startswith("_") and _name not in (
                "bit_generator", "spawn", "get_state", "set_state", "seed") and \
                callable(getattr(_cls, _name)):
            ArrayBackendContext.primitive(getattr(_cls, _name))(_generator_method(_cls, _name))
del _cls, _name


_CONCATENATOR: Any = type(np.r_).__mro__[1]  # NumPy's AxisConcatenator: np.r_, np.c_


def _concatenated(ctx: ArrayBackendContext, conc: Any, key: Any) -> Any:
    """``np.r_[...]`` and ``np.c_[...]`` in the context's namespace: NumPy's own would make
    NumPy arrays of the items (``np.array(item, subok=True)``)."""
    be = ctx.backend
    if be.is_numpy:
        return _CONCATENATOR.__getitem__(conc, key)
    items = key if isinstance(key, tuple) else (key,)
    if conc.matrix or any(isinstance(k, str) for k in items):
        raise _table.UnsupportedArgumentError(
            f"np.r_/np.c_ with a string directive or a matrix has no counterpart in "
            f"{be.name}; call np.concatenate or np.stack inside the context")
    xp = be.xp
    like = next((k for k in items if be.is_array(_innermost(k))), None)
    parts = []
    for k in items:
        k = _innermost(k)
        if isinstance(k, slice):
            step = 1 if k.step is None else k.step
            start = 0 if k.start is None else k.start
            if isinstance(step, complex):
                k = xp.linspace(start, k.stop, int(abs(step)))
            else:
                k = xp.arange(start, k.stop, step)
        elif not be.is_array(k):
            if type(k) in (list, tuple):
                k = _table._stacked(be, k)
                k = k if be.is_array(k) else xp.asarray(k)
            else:
                k = be._scalar_array(k, like) if not be.numpy_like else xp.asarray(k)
        nd = k.ndim
        if nd < conc.ndmin:
            if nd == 0:
                k = xp.reshape(k, (1,) * conc.ndmin)
            elif nd == 1 and conc.ndmin == 2:
                k = xp.reshape(k, (-1, 1) if conc.trans1d == 0 else (1, -1))
            else:
                raise _table.UnsupportedArgumentError(
                    f"np.r_/np.c_ of a {nd}-d item with ndmin={conc.ndmin} has no counterpart "
                    f"in {be.name}; call np.concatenate inside the context")
        parts.append(k)
    parts = list(be.promoted(tuple(parts)))
    concat = getattr(xp, "concat", None) or xp.concatenate
    return concat(parts, axis=conc.axis)


@ArrayBackendContext.primitive(_CONCATENATOR.__getitem__)
@opaque
def _concatenator_method(ctx: ArrayBackendContext, conc: Any, key: Any) -> Any:
    return _concatenated(ctx, conc, key)


for _type in (type(np.r_), type(np.c_)):
    ArrayBackendContext.primitive(operator.getitem, (_type, object))(opaque(_concatenated))
del _type


@ArrayBackendContext.primitive(np.size)
@opaque
def _size(ctx: ArrayBackendContext, a: Any, axis: Any = None) -> Any:
    """``np.size`` from the shape: NumPy's asks the array's ``__array_function__``, and Dask,
    which lacks ``size``, would compute the whole array to answer it."""
    array = _innermost(a)
    if ctx.backend.is_numpy or not ctx.backend.is_array(array):
        return np.size(array, axis)
    shape = tuple(array.shape)
    return math.prod(shape) if axis is None else shape[axis]


# -- writes into Dask arrays ---------------------------------------------------------------
# A Dask array is a graph, not memory: ``x[i] = v`` replaces the graph of the object ``x`` (so
# the caller's array sees it, as in NumPy), but ``x[1:3]``, ``x.T`` or ``np.reshape(x, -1)`` is
# a new array, not a view, and Dask arrays have no in-place operators (``x -= y`` would rebind a
# local name only).  The context makes in-place operators write into their target, as NumPy's
# do, and refuses a write NumPy would have made through a view: into an array that NumPy would
# have made a view of another (basic indexing, the view functions and methods below), or into
# one that such a view was taken from while the view is alive.

_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub,
            operator.imul: operator.mul, operator.itruediv: operator.truediv,
            operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
            operator.ipow: operator.pow, operator.imatmul: operator.matmul,
            operator.iand: operator.and_, operator.ior: operator.or_,
            operator.ixor: operator.xor, operator.ilshift: operator.lshift,
            operator.irshift: operator.rshift}
# id(view) -> (ref(view), refs to the arrays it views: its base, and the base's own bases)
_VIEW_OF: dict[int, tuple[Any, list[Any]]] = {}
_VIEWS_OF: dict[int, list[Any]] = {}            # id(base) -> [ref(base), refs to its views]
# id(view) -> (ref(view), ref(base), key): the views basic indexing made (x[i], x[1:3])
_KEY_OF: dict[int, tuple[Any, Any, Any]] = {}
_UNCHECKED_SETITEM: dict[type, Any] = {}  # Dask's own __setitem__, before the context's check
_dask_registered: list[type] = []
# NumPy functions whose results are views of their (first) argument, wholly or in part
# (``broadcast_arrays``: each result of the argument in its place).  A read-only view
# (``broadcast_to``, ``diagonal``) refuses writes in NumPy: refused here as well.
_VIEW_FUNCTIONS = frozenset(
    "reshape ravel transpose swapaxes moveaxis rollaxis expand_dims squeeze atleast_1d "
    "atleast_2d atleast_3d matrix_transpose permute_dims real imag diagonal broadcast_to "
    "broadcast_arrays flip fliplr flipud rot90 split array_split hsplit vsplit dsplit "
    "unstack".split())
# NumPy functions whose first argument is a sequence of arrays, not one array.
_SEQUENCE_FIRST = frozenset(
    "concatenate concat stack vstack hstack dstack column_stack row_stack block select "
    "lexsort linalg.multi_dot broadcast_arrays meshgrid ix_ einsum einsum_path".split())
# The methods and attributes of a Dask array that NumPy's give views for.
_VIEW_METHODS = ("T", "mT", "transpose", "reshape", "ravel", "squeeze", "swapaxes", "real",
                 "imag", "view", "diagonal")


def _is_basic(key: Any) -> bool:
    """Whether NumPy indexing with ``key`` gives a view (ints, slices, ``...``, None)."""
    parts = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice))
               for k in parts)


def _live(ref: Any, obj: Any = None) -> bool:
    target = ref()
    return target is not None and (obj is None or target is obj)


def _record_views(out: Any, base: Any, array_type: Any) -> None:
    """Remember that NumPy's result ``out`` (an array, or a tuple/list of them) would be a
    view of ``base``: writes into either while the other is alive are refused."""
    if isinstance(out, (tuple, list)):
        for item in out:
            _record_views(item, base, array_type)
        return
    if out is base or not isinstance(out, array_type) or not isinstance(base, array_type) \
            or getattr(out, "ndim", 0) == 0:  # (NumPy: a scalar, not a view)
        return
    entry = _VIEW_OF.get(id(base))
    bases = [weakref.ref(base)]
    if entry is not None and _live(entry[0], base):
        bases += [r for r in entry[1] if _live(r)]
    _VIEW_OF[id(out)] = (weakref.ref(out), bases)
    weakref.finalize(out, _forget, id(out))
    for ref in bases:
        owner = ref()
        refs = _VIEWS_OF.get(id(owner))
        if refs is None or not refs or refs[0]() is not owner:
            refs = _VIEWS_OF[id(owner)] = [weakref.ref(owner)]
            weakref.finalize(owner, _forget, id(owner))
        refs.append(weakref.ref(out))


def _check_write(x: Any, what: str, value: Any) -> None:
    """Refuse the write of ``value`` into ``x`` (``value`` itself may be a view of ``x``:
    ``x[1:] = x[:-1]`` reads it before writing, in NumPy and in Dask)."""
    entry = _VIEW_OF.get(id(x))
    if entry is not None and _live(entry[0], x) and any(_live(r) for r in entry[1]):
        raise ViewWriteError(
            f"{what} writes into a slice or other view of another Dask array (x[1:3], x.T, "
            f"np.reshape(x, ...)...): in NumPy it is a view and the write reaches the array "
            f"it was taken from, in Dask it would not; write into that array itself "
            f"(a[1:3] = v), or copy the view first (np.copy)")
    views = [r for r in _VIEWS_OF.get(id(x), ())[1:] if _live(r) and r() is not value]
    if views:
        raise ViewWriteError(
            f"{what} writes into a Dask array that {len(views)} live slice(s) or other views "
            f"were taken from: in NumPy those are views and would see the write, in Dask "
            f"they would not; take them after writing, or copy them (np.copy)")


def _forget(key: int) -> None:
    _VIEW_OF.pop(key, None)
    _VIEWS_OF.pop(key, None)
    _KEY_OF.pop(key, None)


def _live_refs(refs: Any) -> list[Any]:
    return [r() for r in refs if r() is not None]


def _write_through(x: Any, new: Any, setitem: Any) -> bool:
    """``x op= y`` where ``x`` is a view basic indexing made of ``base`` (``x[i] += v``,
    ``row = a[0]; row *= 2``), written as NumPy writes it: into ``x`` and through it into
    ``base[key]``.  Only where nothing else would miss the write: ``base`` is no view itself,
    ``x`` has no views of its own, and every other live view of ``base`` is one basic indexing
    made of a part that does not overlap ``key``.  False (nothing written) otherwise."""
    found = _KEY_OF.get(id(x))
    if found is None or found[0]() is not x or setitem is None:
        return False
    base, key = found[1](), found[2]
    entry = _VIEW_OF.get(id(x))
    if base is None or entry is None or _live_refs(entry[1]) != [base]:
        return False
    above = _VIEW_OF.get(id(base))
    if above is not None and _live(above[0], base) and _live_refs(above[1]):
        return False
    if _live_refs(_VIEWS_OF.get(id(x), ())[1:]):
        return False
    for view in _live_refs(_VIEWS_OF.get(id(base), ())[1:]):
        if view is x:
            continue
        other = _KEY_OF.get(id(view))
        if other is None or other[0]() is not view or other[1]() is not base or \
                _overlap(key, other[2], tuple(base.shape)):
            return False
    setitem(x, Ellipsis, new)
    setitem(base, key, x)
    return True


def _overlap(a: Any, b: Any, shape: tuple[Any, ...]) -> bool:
    """Whether the parts ``base[a]`` and ``base[b]`` (basic keys) may share elements: True
    unless, on some axis, they select disjoint integers or disjoint unit-step ranges."""
    ranges = [_ranges(k, shape) for k in (a, b)]
    if ranges[0] is None or ranges[1] is None:
        return True
    for (lo1, hi1), (lo2, hi2) in zip(ranges[0], ranges[1]):
        if hi1 <= lo2 or hi2 <= lo1:
            return False
    return True


def _ranges(key: Any, shape: tuple[Any, ...]) -> list[tuple[int, int]] | None:
    """Per axis of ``shape``, the [low, high) range of indices ``key`` selects (a stepped
    slice as its whole span); None for a key this does not follow (``None``, unknown sizes)."""
    parts = list(key) if isinstance(key, tuple) else [key]
    if any(k is None for k in parts) or parts.count(Ellipsis) > 1 or \
            not all(isinstance(n, int) for n in shape):
        return None
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        parts[at:at + 1] = [slice(None)] * (len(shape) - len(parts) + 1)
    parts += [slice(None)] * (len(shape) - len(parts))
    out = []
    for k, n in zip(parts, shape):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step != 1:
                return None
            out.append((start, max(start, stop)))
        else:
            i = int(k) + (n if int(k) < 0 else 0)
            out.append((i, i + 1))
    return out


def _register_dask_writes(array_type: type) -> None:
    """Register the subscript and in-place operator primitives for Dask arrays, and make its
    view methods record their views (once)."""
    if array_type in _dask_registered:
        return
    _dask_registered.append(array_type)
    cls = ArrayBackendContext

    @cls.primitive(operator.getitem, (array_type, object))
    @opaque
    def _getitem(ctx: Any, x: Any, key: Any) -> Any:
        _refuse_tagged(ctx, "x[i]", (x, key))
        return x[key]  # (the patched __getitem__ records a view)

    @cls.primitive(operator.setitem, (array_type, object, object))
    @opaque
    def _setitem(ctx: Any, x: Any, key: Any, value: Any) -> None:
        _refuse_tagged(ctx, "x[i] = v", (x, key, value))
        x[key] = value  # (the patched __setitem__ checks the write)

    for inplace, binary in _INPLACE.items():
        cls.primitive(inplace, (array_type, object))(_inplace(inplace, binary))
    package = os.path.dirname(sys.modules[array_type.__module__.split(".")[0]].__file__
                              or "") + os.sep
    _patch_subscripts(array_type, package)
    for name in _VIEW_METHODS:
        attr = array_type.__dict__.get(name)
        if isinstance(attr, property) and attr.fget is not None:
            setattr(array_type, name, property(_recording(attr.fget, array_type, package),
                                               attr.fset, attr.fdel, attr.__doc__))
        elif isinstance(attr, types.FunctionType):
            setattr(array_type, name, _recording(attr, array_type, package))


def _recording(method: Any, array_type: type, package: str) -> Any:
    """``method`` of a Dask array, recording its result as a view of the array when called
    from outside Dask during a run (Dask's own uses make new arrays of their own)."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(self, *args, **kwargs)
        if current_context() is not None and not \
                sys._getframe(1).f_code.co_filename.startswith(package):
            _record_views(out, self, array_type)
        return out
    return opaque(run)


_SYMBOLS = {operator.iadd: "+=", operator.isub: "-=", operator.imul: "*=",
            operator.itruediv: "/=", operator.ifloordiv: "//=", operator.imod: "%=",
            operator.ipow: "**=", operator.imatmul: "@=", operator.iand: "&=",
            operator.ior: "|=", operator.ixor: "^=", operator.ilshift: "<<=",
            operator.irshift: ">>="}


def _inplace(inplace: Any, binary: Any) -> Any:
    symbol = _SYMBOLS[inplace]

    @opaque
    def run(ctx: Any, x: Any, y: Any) -> Any:
        _refuse_tagged(ctx, f"x {symbol} y", (x, y))
        new = binary(x, y)
        if not _write_through(x, new, _UNCHECKED_SETITEM.get(type(x))):
            _check_write(x, f"x {symbol} y", y)
            x[...] = new  # into x itself, as NumPy's in-place operators write
        return x
    return run


def _refuse_tagged(ctx: Any, what: str, args: tuple[Any, ...]) -> None:
    """An EnclosingTagError for ``what`` given a value an enclosing context tagged (a
    derivative taken outside the context): run here natively, its derivative would be lost."""
    if any(type(a) is Tagged for a in args):
        ctx._enclosing_tags(operator.getitem, what, args, {})


def _dask_run() -> bool:
    """Whether Dask arrays follow NumPy's views and in-place writes now: in a run of an
    ArrayBackendContext of Dask, or of a derivative (overdub_ad's contexts, which run
    ``x[i]`` or ``x *= 2`` by the array's own methods, inside such a context); not outside a
    run, nor in a run of any other context (a CountContext sees Dask code compute as it does
    natively)."""
    ctx = current_context()
    if ctx is None:
        return False
    if isinstance(ctx, ArrayBackendContext):
        return ctx.backend.name == "dask.array"
    return type(ctx).__module__.startswith("overdub_ad.")


def _patch_subscripts(array_type: Any, package: str) -> None:
    """Make the Dask array's own ``__getitem__``, ``__setitem__`` and ``__iter__`` record and
    check views, and give it in-place operators, during a run of a Dask context only: a
    derivative (or any context) taken inside the Dask context may run ``x[i]``, ``x[i] = v``,
    ``x *= 2`` or ``for row in x`` by the array's methods, which the context's operator
    primitives never see.  Outside such a run, and for Dask's own calls, they are Dask's."""
    getitem, setitem, iterate = (array_type.__dict__[name] for name in
                                 ("__getitem__", "__setitem__", "__iter__"))
    _UNCHECKED_SETITEM[array_type] = setitem

    def ours() -> bool:
        return _dask_run() and not sys._getframe(2).f_code.co_filename.startswith(package)

    @functools.wraps(getitem)
    def __getitem__(self: Any, key: Any) -> Any:
        out = getitem(self, key)
        if _is_basic(key) and ours():
            _record_views(out, self, array_type)
            if id(out) in _VIEW_OF:
                _KEY_OF[id(out)] = (weakref.ref(out), weakref.ref(self), key)
        return out

    @functools.wraps(setitem)
    def __setitem__(self: Any, key: Any, value: Any) -> None:
        if ours():
            _check_write(self, "x[...] = v", value)
        setitem(self, key, value)

    @functools.wraps(iterate)
    def __iter__(self: Any) -> Any:
        if not ours():
            return iterate(self)

        def rows() -> Any:  # NumPy's rows are views: for row in x, a, b = x, list(x)...
            for i in range(len(self)):
                row = getitem(self, i)
                _record_views(row, self, array_type)
                if id(row) in _VIEW_OF:
                    _KEY_OF[id(row)] = (weakref.ref(row), weakref.ref(self), i)
                yield row
        return rows()

    for name, method in (("__getitem__", __getitem__), ("__setitem__", __setitem__),
                         ("__iter__", __iter__)):
        setattr(array_type, name, opaque(method))
    for inplace, binary in _INPLACE.items():
        name = f"__i{inplace.__name__[1:]}__"
        if name not in array_type.__dict__:
            setattr(array_type, name, opaque(_inplace_method(inplace, binary, setitem,
                                                             package)))


def _inplace_method(inplace: Any, binary: Any, setitem: Any, package: str) -> Any:
    """The in-place operator method of a Dask array (Dask has none, so ``x *= 2`` rebinds
    ``x``): during a run of a Dask context a write into the array itself, as NumPy's;
    otherwise (and for Dask's own code) NotImplemented, which leaves Python's rebinding."""
    symbol = _SYMBOLS[inplace]

    def method(self: Any, other: Any) -> Any:
        if not _dask_run() or sys._getframe(1).f_code.co_filename.startswith(package):
            return NotImplemented
        new = binary(self, other)
        if not _write_through(self, new, setitem):
            _check_write(self, f"x {symbol} y", other)
            setitem(self, Ellipsis, new)
        return self
    method.__name__ = method.__qualname__ = f"__i{inplace.__name__[1:]}__"
    return method


# -- the GPU ---------------------------------------------------------------------------------

_INSTALL = ('install CuPy with pip install "overdub[gpu]" (cupy-cuda12x, for CUDA 12) on a '
            'machine with an NVIDIA GPU')
_INSTEAD = "or run the same code on the CPU with ArrayBackendContext(numpy)"


def _cupy() -> Any:
    try:
        import cupy  # noqa: PLC0415 (optional dependency)
    except Exception as exc:  # ImportError, or a CUDA library that fails to load
        raise GPUUnavailableError(
            f"GPUContext needs CuPy, which could not be imported ({type(exc).__name__}: "
            f"{exc}): {_INSTALL}, {_INSTEAD}") from exc
    return cupy


def _device_count(cupy: Any) -> int:
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError: no driver, insufficient driver, no device
        raise GPUUnavailableError(
            f"GPUContext found no CUDA device: CuPy is installed but "
            f"cupy.cuda.runtime.getDeviceCount() failed ({type(exc).__name__}: {exc}); run on "
            f"a machine with an NVIDIA GPU and a CUDA 12 driver (nvidia-smi should list it), "
            f"{_INSTEAD}") from exc


class GPUContext(ArrayBackendContext):
    """``GPUContext(device=None, float32=False, host_fallback=False)``: ArrayBackendContext
    with CuPy, on CUDA device ``device`` (CuPy's current device when None).

    Raises :class:`GPUUnavailableError` naming what is missing (CuPy, or a CUDA device) and
    what to do instead.  Results stay on the device; :func:`to_host` brings them back.

    Example::

        ctx = GPUContext()
        x = to_device(ctx, np.random.rand(1000, 1000))
        y = to_host(ctx, overdub(ctx, my_numpy_function, x))

    See also: :class:`ArrayBackendContext`, :func:`to_device`, :func:`to_host`.
    """

    def __init__(self, device: int | None = None, float32: bool = False,
                 host_fallback: bool = False, *, metadata: Any = None,
                 passes: Any = ()) -> None:
        cupy = _cupy()
        count = _device_count(cupy)
        if count == 0:
            raise GPUUnavailableError(f"GPUContext found no CUDA device (CuPy sees 0 devices); "
                                      f"{_INSTEAD}")
        if device is not None and not (isinstance(device, int) and 0 <= device < count):
            raise GPUUnavailableError(f"GPUContext(device={device!r}): there are {count} CUDA "
                                      f"device(s), numbered 0 to {count - 1}")
        super().__init__(cupy, float32, host_fallback, metadata=metadata, passes=passes)
        self.device = device

    def _run(self, fn: Any, label: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.device is None:
            return self.backend.runner(fn, label)(*args, **kwargs)
        with self.xp.cuda.Device(self.device):
            return self.backend.runner(fn, label)(*args, **kwargs)


# -- explicit transfers ------------------------------------------------------------------------

@opaque
def to_device(ctx: ArrayBackendContext, a: Any) -> Any:
    """``to_device(ctx, a)``: ``a`` (a NumPy array, scalar or nested list, or tuples, lists and
    dicts of them) as arrays of ``ctx``'s namespace, on its device.  Arrays already there are
    returned as they are; dtypes are kept.

    Example::

        x = to_device(GPUContext(), np.ones((3, 3)))      # a cupy.ndarray

    See also: :func:`to_host`.
    """
    _check_ctx(ctx, "to_device")
    if isinstance(ctx, GPUContext) and ctx.device is not None:
        with ctx.xp.cuda.Device(ctx.device):
            return _map(ctx.backend.upload, a) if isinstance(a, (tuple, dict)) \
                else ctx.backend.upload(a)
    return _map(ctx.backend.upload, a) if isinstance(a, (tuple, dict)) else \
        ctx.backend.upload(a)


@opaque
def to_host(ctx: ArrayBackendContext, a: Any) -> Any:
    """``to_host(ctx, a)``: arrays of ``ctx``'s namespace in ``a`` (or in tuples, lists and
    dicts) copied to NumPy arrays on the host; a lazy Dask array is computed.  The only way
    results come back: nothing inside the context copies to the host for you.

    See also: :func:`to_device`.
    """
    _check_ctx(ctx, "to_host")
    return _map(ctx.backend.download, a)


def _check_ctx(ctx: Any, verb: str) -> None:
    if not isinstance(ctx, ArrayBackendContext):
        raise TypeError(f"{verb}(ctx, a): ctx must be an ArrayBackendContext (or GPUContext), "
                        f"got {ctx!r}")
