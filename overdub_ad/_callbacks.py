"""Python callbacks that meet C code, and the public function a missing rule is reported for.

Three mechanisms that the engines and the SciPy rules share:

- :func:`free_values` -- closure conversion.  A solver's derivative with respect to what its
  callback closes over (``quad(lambda s: exp(-k * s), 0, 1)`` depends on ``k``) needs those
  values as explicit arguments: the callback's closure cells, defaults, ``functools.partial``
  arguments, the functions a bound method's object holds and the tuples among them are
  searched for numbers and arrays, and a ``rebuild``
  function makes a copy of the callback with other values put in their place.  Values reached
  some other way (a list or dict the callback reads, an attribute, a global) are left where they
  are: the solver rules check that the callback has no derivative left once the values found
  are held constant (never a silent zero).
- :func:`call_guarded` -- a C function given a Python callable (``_quadpack._qagse(func,
  ...)``) calls it natively, behind the context's back: whatever derivative the callback's
  result carries would be dropped.  The engines run such calls with each callable wrapped so
  that the callback runs under the context, and a result that carries a derivative raises
  :class:`MissingRuleError` naming the public function the user called.
- :func:`public_caller` -- the library function the user's code called, found on the stack, so
  that an error names ``scipy.linalg.solve_triangular`` rather than LAPACK's ``dtrtrs``.
"""

from __future__ import annotations

import copy
import functools
import sys
import sysconfig
import types
from collections.abc import Callable
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Any

import numpy as np

from overdub import Tagged, opaque, overdub

from . import _rules

# -- closure conversion -----------------------------------------------------------------------

_DEPTH = 6  # how deep nested closures, partials and tuples are searched
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python


def _is_value(v: Any) -> bool:
    """A value a derivative may be taken with respect to: a number or a float array."""
    if type(v) is Tagged:
        return True
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (float, complex, np.floating, np.complexfloating)):
        return True
    return type(v) is np.ndarray and v.dtype.kind in "fc"


class _Scan:
    """The values found in an object, in order, and how to rebuild the object around others."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.active: set[int] = set()  # objects being scanned (a recursive closure)

    def scan(self, obj: Any, depth: int) -> Callable[[list[Any]], Any] | None:
        """A builder ``values -> copy of obj`` (None: ``obj`` holds no value, kept as it is)."""
        if _is_value(obj):
            k = len(self.values)
            self.values.append(obj)
            return lambda values: values[k]
        if depth <= 0 or id(obj) in self.active:
            return None
        kind = type(obj)
        self.active.add(id(obj))
        try:
            if kind is tuple or (isinstance(obj, tuple) and hasattr(obj, "_fields")):
                return self._tuple(obj, depth)
            if kind is types.FunctionType:
                return self._function(obj, depth)
            if kind is types.MethodType:
                return self._method(obj, depth)
            if kind is functools.partial:
                return self._partial(obj, depth)
            return None
        finally:
            self.active.discard(id(obj))

    def _tuple(self, obj: Any, depth: int) -> Callable[[list[Any]], Any] | None:
        parts = [self.scan(item, depth - 1) for item in obj]
        if all(p is None for p in parts):
            return None
        make = type(obj)._make if hasattr(obj, "_fields") else type(obj)

        def build(values: list[Any]) -> Any:
            return make(item if p is None else p(values) for item, p in zip(obj, parts))
        return build

    def _function(self, fn: types.FunctionType, depth: int
                  ) -> Callable[[list[Any]], Any] | None:
        cells = []
        for cell in fn.__closure__ or ():
            try:
                cells.append(self.scan(cell.cell_contents, depth - 1))
            except ValueError:  # an empty cell (a name not bound yet)
                cells.append(None)
        defaults = self.scan(fn.__defaults__, depth - 1) if fn.__defaults__ else None
        kwdefaults = fn.__kwdefaults__ or {}
        kwparts = {k: self.scan(v, depth - 1) for k, v in kwdefaults.items()}
        if all(c is None for c in cells) and defaults is None and \
                all(p is None for p in kwparts.values()):
            return None

        def build(values: list[Any]) -> Any:
            closure = tuple(cell if part is None else types.CellType(part(values))
                            for cell, part in zip(fn.__closure__ or (), cells))
            copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                                      fn.__defaults__ if defaults is None else defaults(values),
                                      closure or None)
            copy.__kwdefaults__ = {k: _rebuilt(v, kwparts[k], values)
                                   for k, v in kwdefaults.items()} or None
            copy.__dict__.update(fn.__dict__)
            copy.__qualname__, copy.__module__ = fn.__qualname__, fn.__module__
            return copy
        return build

    def _method(self, obj: types.MethodType, depth: int) -> Callable[[list[Any]], Any] | None:
        """A bound method: its function, and the functions its object holds as attributes
        (SciPy's ``nquad`` integrates through a method of an object holding the user's
        integrand), rebuilt on a shallow copy of the object.  A number or array attribute is
        not searched (``self.k`` read by the callback raises, see the solver rules): the
        object's own state stays the user's."""
        func = self.scan(obj.__func__, depth - 1)
        owner = obj.__self__
        namespace = getattr(owner, "__dict__", None) \
            if type(owner).__flags__ & _HEAPTYPE else None
        attributes = {} if type(namespace) is not dict else {
            name: part for name, part in
            ((name, self.scan(value, depth - 1)) for name, value in namespace.items()
             if isinstance(value, _CALLBACK_TYPES))
            if part is not None}
        if func is None and not attributes:
            return None

        def build(values: list[Any]) -> Any:
            target = owner
            if attributes:
                target = copy.copy(owner)
                for name, part in attributes.items():
                    setattr(target, name, part(values))
            return types.MethodType(obj.__func__ if func is None else func(values), target)
        return build

    def _partial(self, obj: functools.partial[Any], depth: int
                 ) -> Callable[[list[Any]], Any] | None:
        func = self.scan(obj.func, depth - 1)
        args = self.scan(obj.args, depth - 1)
        kw = {k: self.scan(v, depth - 1) for k, v in obj.keywords.items()}
        if func is None and args is None and all(p is None for p in kw.values()):
            return None

        def build(values: list[Any]) -> Any:
            return functools.partial(obj.func if func is None else func(values),
                                     *(obj.args if args is None else args(values)),
                                     **{k: _rebuilt(v, kw[k], values)
                                        for k, v in obj.keywords.items()})
        return build


def _rebuilt(item: Any, builder: Callable[[list[Any]], Any] | None, values: list[Any]) -> Any:
    return item if builder is None else builder(values)


@opaque
def free_values(obj: Any) -> tuple[tuple[Any, ...], Callable[[tuple[Any, ...]], Any]]:
    """``(values, rebuild)``: the numbers and arrays ``obj`` (a callback, or a tuple of a
    callback and its extra arguments) closes over, and ``rebuild(others)``, a copy of ``obj``
    with ``others`` in their places.  Opaque: it must see the values themselves, derivative
    and all, and hand them back as they are."""
    scan = _Scan()
    builder = scan.scan(obj, _DEPTH)
    values = tuple(scan.values)

    def rebuild(others: tuple[Any, ...]) -> Any:
        if builder is None:
            return obj
        if len(others) != len(values):
            raise ValueError(f"rebuild: {len(values)} values expected, got {len(others)}")
        return builder(list(others))
    return values, opaque(rebuild)


# -- C functions that call back into Python ---------------------------------------------------

_CALLBACK_TYPES = (types.FunctionType, types.MethodType, functools.partial)


def c_callee(fn: Any) -> bool:
    """A function of a compiled extension module (or an f2py Fortran routine) that calls a
    Python callable it is given during the call, without the context seeing it: SciPy's
    QUADPACK, MINPACK, ODEPACK...  Its callable arguments are wrapped (:func:`call_guarded`).

    Never a function that may *store* what it is given, where a wrapper would leak into the
    user's data (``d[k] = fn`` is ``operator.setitem``; ``functools.singledispatch`` caches its
    functions in a dict; ``np.frompyfunc`` keeps its callable): builtins, the standard library's
    modules (built in or compiled) and NumPy's own C functions are never guarded.  Their stored
    callables stay the user's own functions, which the context enters when they are called."""
    kind = type(fn)
    if kind is types.BuiltinFunctionType:
        module = getattr(fn, "__module__", None)
        return type(module) is str and \
            isinstance(getattr(fn, "__self__", None), (types.ModuleType, type(None))) and \
            _guarded_module(module)
    return kind.__name__ == "fortran"


@functools.cache
def _guarded_module(name: str) -> bool:
    """``name`` is a compiled extension module outside the standard library (named in
    ``sys.stdlib_module_names``, its extension modules too) and NumPy."""
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names or top in ("builtins", "numpy"):
        return False
    filename = getattr(sys.modules.get(name), "__file__", None)
    return type(filename) is str and filename.endswith(tuple(EXTENSION_SUFFIXES))


def compiled_method(fn: Any) -> bool:
    """A method whose function is compiled (Cython's ``rng.normal``, bound as a Python method):
    C code that reads a tagged argument as a plain number, so a primitive needing a rule, not
    Python code to recurse into or run natively."""
    if type(fn) is not types.MethodType:
        return False
    kind = type(fn.__func__)
    return kind is types.BuiltinFunctionType or kind.__name__ in _CYTHON_FUNCTIONS


_CYTHON_FUNCTIONS = frozenset(("cython_function_or_method", "fused_cython_function"))


def has_callback(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    for a in args:
        if isinstance(a, _CALLBACK_TYPES):
            return True
    for a in kwargs.values():
        if isinstance(a, _CALLBACK_TYPES):
            return True
    return False


def call_guarded(ctx: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 carries: Callable[[Any], bool], mode: str, run: Callable[..., Any]) -> Any:
    """``run(fn, *args, **kwargs)`` with each Python callable argument wrapped: while ``fn``
    runs, a call of it is made through ``ctx``, and a result that carries a derivative of
    ``ctx`` raises :class:`MissingRuleError` (``fn`` would read it as a plain number).  C code
    may swallow an exception raised in a callback; the error is raised again once ``fn``
    returns."""
    errors: list[BaseException] = []
    live = [True]

    def wrap(callback: Any) -> Any:
        @opaque
        def guard(*a: Any, **k: Any) -> Any:
            if not live[0]:  # kept by the C code and called after it returned
                return callback(*a, **k)
            out = overdub(ctx, callback, *a, **k)
            if carries(out):
                error = _callback_error(fn, callback, mode, type(ctx).__name__)
                errors.append(error)
                raise error
            return out
        return guard

    args = tuple(wrap(a) if isinstance(a, _CALLBACK_TYPES) else a for a in args)
    kwargs = {k: wrap(v) if isinstance(v, _CALLBACK_TYPES) else v for k, v in kwargs.items()}
    try:
        out = run(fn, *args, **kwargs)
    except BaseException:
        if errors:
            raise errors[0] from None
        raise
    finally:
        live[0] = False
    if errors:
        raise errors[0]
    return out


def _callback_error(fn: Any, callback: Any, mode: str, context: str) -> _rules.MissingRuleError:
    public = public_caller(fn)
    name = public or public_name(fn)
    inside = "" if public is None else f" (through its internal function {_rules._name(fn)})"
    return _rules.MissingRuleError(
        f"no {mode}-mode derivative rule for {name}{inside} under {context}: it calls back "
        f"into {_rules._name(callback)}, whose result depends on a differentiated value (one "
        f"it closes over or reads), and would use that result as a plain number, dropping its "
        f"derivative; differentiate with respect to values the solver has a rule for (see "
        f"docs/scipy.md) or register a stand-in for {name}")


# -- the public function a user called ----------------------------------------------------------

_OWN = ("overdub", "overdub_ad", "overdub_gpu")


def _library_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(sorted(found))


_LIBRARY = _library_prefixes()


def _is_library(frame: types.FrameType) -> bool | None:
    """True for a library's frame, False for the user's, None for overdub's own."""
    module = frame.f_globals.get("__name__", "") or ""
    if not module or module.partition(".")[0] in _OWN:
        return None  # (the core's generated dispatchers have no module)
    filename = frame.f_code.co_filename
    return filename.startswith(_LIBRARY) or filename.startswith("<frozen")


def public_caller(fn: Any) -> str | None:
    """The library function the user's own code called, whose code (at any depth) called
    ``fn``: ``scipy.linalg.solve_triangular`` for LAPACK's ``dtrtrs``.  None where ``fn`` was
    called by the user's code itself."""
    frame: types.FrameType | None = sys._getframe(1)
    outermost = None
    while frame is not None:
        library = _is_library(frame)
        if library is False:
            break
        if library:
            code = frame.f_code
            qualname = getattr(code, "co_qualname", code.co_name)
            # a public name: not a decorator's wrapper, a closure or a private helper
            if "<" not in qualname and not qualname.rpartition(".")[2].startswith("_"):
                outermost = (frame.f_globals.get("__name__", ""), qualname)
        frame = frame.f_back
    if outermost is None or outermost == (getattr(fn, "__module__", None),
                                          getattr(fn, "__qualname__", None)):
        return None
    return _public_path(*outermost)


def describe(fn: Any) -> str:
    """``fn``'s name for an error: the public function the user called first, if any."""
    public = public_caller(fn)
    if public is None:
        return public_name(fn)
    return f"{public} (its internal function {_rules._name(fn)})"


def public_name(fn: Any) -> str:
    """``fn``'s name under the package that exports it (``scipy.linalg.solve``, not
    ``scipy.linalg._basic.solve``)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if type(module) is str and type(qualname) is str and "<" not in qualname and \
            module.partition(".")[0] not in ("builtins", "_operator") and module in sys.modules:
        return _public_path(module, qualname)
    return _rules._name(fn)


def _public_path(module: str, qualname: str) -> str:
    """``module.qualname`` under the shortest package that exports the same function
    (``scipy.linalg._basic.solve`` is ``scipy.linalg.solve``)."""
    head = qualname.partition(".")[0]
    parts = module.split(".")
    for n in range(1, len(parts)):
        package = sys.modules.get(".".join(parts[:n]))
        obj = getattr(package, head, None)
        if obj is not None and getattr(obj, "__module__", None) == module and \
                getattr(obj, "__qualname__", None) == head:
            return ".".join(parts[:n]) + "." + qualname
    return f"{module}.{qualname}"
