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
import operator
import sys
import sysconfig
import types
from collections.abc import Callable
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Any

import numpy as np

from overdub import Tagged, can_recurse, carries_tags, keeps_heap_metadata, opaque, overdub

from . import _arrays, _rules

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
        if issubclass(type(a), _CALLBACK_TYPES):  # (not isinstance: it reads __class__)
            return True
    for a in kwargs.values():
        if issubclass(type(a), _CALLBACK_TYPES):
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


# -- values used behind the context's back ----------------------------------------------------

def escape_hint(ctx: Any) -> str:
    """An AD context's :meth:`overdub.Context.escape_hint`: its user never held the context
    (a derivative's call makes it), so the TagError says where the value came from."""
    return ("the value comes from a derivative that has returned, kept in a closure, a "
            "container or an object made while it ran; compute with it inside the "
            "differentiated function, or return it as one of its outputs")


def refuse_native_use(ctx: Any, use: str, result: Any) -> None:
    """An AD context's :meth:`overdub.Context.native_use`: a number or array computed natively
    from a differentiated value by the user's code (a callback that NumPy's C code calls,
    ``np.frompyfunc``'s; Python code run natively) would go on without its derivative: raise
    :class:`MissingRuleError` here, naming the function and the library that called it.
    overdub's own code reading a value's shape or dtype natively (an enclosing derivative's
    value given to an inner ``jvp``) is not the user's computation."""
    if not (_is_value(result) or type(result) is np.ndarray or (
            type(result) is tuple and any(map(_is_value, result)))):
        return  # (an int, a shape, a dtype: no derivative to lose; divmod's pair has one)
    callers = _native_callers()
    if callers is None or callers[0].rpartition(".")[2] in _TRUTH_METHODS:
        return  # (a class's __eq__, __lt__, __contains__, __hash__ that C code calls -- list.index,
        # heapq, a dict lookup, `in` -- gives it a truth value or a hash: no derivative to
        # lose, as the reference route, which stores the object's values plain, computes it)
    quiet = _QUIET.get(id(ctx))
    if quiet is not None:  # (C code given an object holding the value: see read_natively)
        quiet[0] += 1
        return
    callback, library = callers
    by = f"{library}, which calls it natively" if library else "C code, natively"
    raise _rules.MissingRuleError(
        f"no derivative through {callback}: it is called by {by}, behind "
        f"{type(ctx).__name__}'s back, and computes with a differentiated value ({use}); "
        f"the result would be a plain number, dropping the derivative. Give the value as an "
        f"argument of a function the context follows, or loop in Python instead")


# the methods whose results C code reads only as a truth value or a hash
_TRUTH_METHODS = frozenset(("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                            "__hash__", "__contains__", "__bool__"))


def _native_callers() -> tuple[str, str | None] | None:
    """The user's function that used a tagged value natively (the innermost frame, past the
    tagged value's own methods, that is not a library's), and the public library function the
    user's code called that called it (None: C code called it directly); None where that
    frame is overdub's own."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == _TAGGING_FILE:
        frame = frame.f_back  # (Tagged's operator methods)
    while frame is not None and _is_library(frame):
        frame = frame.f_back
    if frame is None or _is_library(frame) is None:
        return None
    code = frame.f_code
    callback = getattr(code, "co_qualname", code.co_name)
    library = None
    frame = frame.f_back
    while frame is not None and _is_library(frame) is not False:
        if _is_library(frame):
            library = _frame_name(frame) or library
        frame = frame.f_back
    return callback, library


_TAGGING_FILE = Tagged.__init__.__code__.co_filename


# -- Python code that C code runs natively, on objects holding differentiated values ----------

_LRU_CACHE = _rules._LRU_CACHE
# what C code calls natively on an object it is given, to read it as a number, an index, an
# array or a sequence (``math.fsum([obj])``, ``np.float64(obj)``, ``np.array([obj], float)``,
# ``round(obj, 3)``, ``a[0] = obj``)
_CONVERSIONS = ("__float__", "__complex__", "__index__", "__int__", "__round__", "__trunc__",
                "__floor__", "__ceil__", "__array__", "__len__", "__getitem__", "__iter__")
_INERT = frozenset((float, int, complex, bool, str, bytes, type(None), np.float64, type,
                    types.FunctionType, types.BuiltinFunctionType, types.ModuleType, range,
                    slice, Tagged))
_NOT_OBJECTS = (list, tuple, dict, set, frozenset, np.ndarray, np.generic, type,
                types.ModuleType, BaseException)
_SCANNED = 256  # how many objects and containers one check looks into, at most
# id(ctx) -> [native uses seen] while read_natively runs a call (see refuse_native_use)
_QUIET: dict[int, list[int]] = {}


def native_holder(ctx: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  direct: Callable[[Any], bool]) -> int | str | None:
    """Where ``fn`` is C code that runs Python code natively on what it is given -- the
    function behind a ``functools.lru_cache`` (``cache``) wrapper, which the cache calls
    itself (a method's object too), or the Python methods that C code calls to read an object
    of the user's class as a number, index, array or sequence (``__float__`` for
    ``math.fsum([obj])``, ``np.float64(obj)``, ``np.array([obj], dtype=float)``; ``__round__``
    for ``round(obj, 3)``) -- the position (or keyword) of an argument, not differentiated
    itself (``direct``), that holds a value ``ctx`` differentiates: in an attribute, a list or
    dict one holds, at any depth, kept aside by the core (read natively, a plain number) or
    stored as it is.  None otherwise (the common call: numbers and arrays are not looked into).
    The context runs such a call with :func:`read_natively`."""
    kind = type(fn)
    if kind is _LRU_CACHE or (kind is types.MethodType and type(fn.__func__) is _LRU_CACHE):
        if kind is types.MethodType:  # (the method's object is the cached function's first)
            args = (fn.__self__, *args)
        for i, a in enumerate(args):
            if type(a) not in _INERT and not direct(a) and holds_kept(ctx, a, direct):
                return i
        for name, a in kwargs.items():
            if type(a) not in _INERT and not direct(a) and holds_kept(ctx, a, direct):
                return name
        return None
    if fn is getattr:  # obj.matrix, a property whose getter is behind the cache
        if len(args) != 2 or type(args[1]) is not str or type(args[0]) in _INERT or \
                not type(args[0]).__flags__ & _HEAPTYPE:
            return None
        try:  # (not getattr: a class's own __getattribute__ would run)
            own = object.__getattribute__(args[0], "__dict__")
        except (AttributeError, TypeError):
            own = None
        if type(own) is dict and args[1] in own:
            return None  # (an instance's own attribute: the common read)
        found = getattr(type(args[0]), args[1], None)
        return 0 if type(found) is property and type(found.fget) is _LRU_CACHE and \
            not direct(args[0]) and holds_kept(ctx, args[0], direct) else None
    if kind is types.FunctionType or kind is types.MethodType or kind is functools.partial or \
            kind is Tagged or kind.__flags__ & _HEAPTYPE:
        return None  # Python code: the context enters it (or refuses it without source)
    for a in args:  # (the common call, numbers and arrays, at once)
        if type(a) not in _INERT and _converted(a):
            break
    else:
        if not kwargs or not any(type(a) not in _INERT and _converted(a)
                                 for a in kwargs.values()):
            return None
    candidates: list[int | str] = [
        i for i, a in enumerate(args) if type(a) not in _INERT and _converted(a)]
    candidates += [k for k, a in kwargs.items() if type(a) not in _INERT and _converted(a)]
    written = _written_array(fn, args)
    if written is not None:  # a[0] = obj: a float array's element converts it
        if written.dtype.kind not in "fc":
            return None
    elif carries_tags(fn) or (type(getattr(fn, "_implementation", None)) is types.FunctionType
                              and _rules.jvp_rules(fn) is None
                              and _rules.vjp_rules(fn) is None) \
            or (_rules._STANDINS and _rules.standin(fn, _rules.vjp_rules) is not None):
        return None  # (attribute and item access, list.append...: values moved, not read;
        # NumPy's functions written in Python, np.polymul, and restated ones: followed -- not
        # one run by its rules, np.sum(seq), which the rules would read as a constant)
    from ._shared import _innermost, _OPERATORS, CONSUMERS, python_iterable
    if id(fn) in CONSUMERS and any(map(python_iterable, args)):
        return None  # math.fsum(bag): the contexts iterate the bag themselves
    # (an operator with a NumPy array or scalar on its left, tagged or not, is NumPy's: Python's
    # protocol does not reach the right operand's class)
    beside = (any(map(direct, args)) or any(map(direct, kwargs.values())) or any(
        type(a) in (list, tuple) and any(map(direct, a)) for a in args)) and (
        id(fn) not in _OPERATORS or isinstance(_innermost(args[0]), (np.ndarray, np.generic)))
    if not beside and written is None and can_recurse(ctx, fn, *args, **kwargs) and \
            not _numpy_takes(fn, args):
        return None  # (float(obj), math.sin(obj), np.asarray(obj), v + w: the core calls the
        # object's method, seen; beside a differentiated value the call is the rules', which
        # read the object natively: read_natively refuses it)
    for at in candidates:
        if holds_kept(ctx, args[at] if isinstance(at, int) else kwargs[at], direct):
            return at
    return None


_BINARY = frozenset(map(id, (operator.add, operator.sub, operator.mul, operator.truediv,
                             operator.floordiv, operator.mod, operator.pow, operator.matmul)))


def _numpy_takes(fn: Any, args: tuple[Any, ...]) -> bool:
    """Whether the binary operator ``fn`` has a NumPy array or scalar on its left and, on its
    right, an object of the user's class that NumPy converts (``np.float64(2.0) * vec``, a
    sequence with ``__rmul__``): NumPy's operator reads the object natively as an array, and
    the object's reflected method never runs, unless its class opts out of NumPy's operators
    (``__array_ufunc__ = None``)."""
    return id(fn) in _BINARY and len(args) == 2 and \
        isinstance(args[0], (np.ndarray, np.generic)) and _converted(args[1]) and \
        getattr(type(args[1]), "__array_ufunc__", 0) is not None


def _written_array(fn: Any, args: tuple[Any, ...]) -> Any:
    """The NumPy array that ``a[i] = v`` (``operator.setitem``, ``a.__setitem__``) or
    ``np.copyto(a, v)`` writes into; None for any other call."""
    if fn is operator.setitem and len(args) == 3:
        array = args[0]
        while type(array) is Tagged:  # (a differentiated array written: its memory)
            array = array.value
        return array if type(array) is np.ndarray else None
    if fn is np.copyto:  # (np.full(2, obj) copies obj into an empty array: C reads it)
        return args[0] if args and type(args[0]) is np.ndarray else None
    if type(fn) is types.MethodWrapperType and fn.__name__ == "__setitem__" and \
            type(fn.__self__) is np.ndarray and len(args) == 2:
        return fn.__self__
    return None


def _converted(x: Any) -> bool:
    """Whether ``x`` is, or a list or tuple ``x`` holds, an object of the user's class that
    defines one of the :data:`_CONVERSIONS` in Python."""
    kind = type(x)
    if kind is list or kind is tuple:
        if len(x) <= 8:  # (a few items: looked at one by one, the cheaper way)
            for item in x:
                if type(item) not in _INERT and _converts(type(item)):
                    return True
            return False
        kinds = set(map(type, x)) if len(x) <= _SCANNED else set(map(type, x[:_SCANNED]))
        return any(_converts(k) for k in kinds - _INERT)
    return _converts(kind)


def _converts(kind: type) -> bool:
    if not kind.__flags__ & _HEAPTYPE or kind is Tagged or issubclass(kind, _NOT_OBJECTS) or \
            _arrays.is_foreign_array_type(kind) or \
            str(kind.__module__).partition(".")[0] in _OWN:
        return False  # (another namespace's array is an array; overdub's own objects, an
        # array's .flat, are followed by the modes)
    for name in _CONVERSIONS:
        found = getattr(kind, name, None)
        if type(found) is types.FunctionType or type(found) is property:
            return True
    return False


def holds_kept(ctx: Any, x: Any, direct: Callable[[Any], bool]) -> bool:
    """Whether ``x`` (an object, a list, a tuple, a dict) holds a value ``ctx``
    differentiates (``direct``) in its attributes, slots, items or elements, at any depth:
    stored as it is, or kept aside by the core (``keeps_heap_metadata``: the object itself
    holds the plain value, which code run natively reads)."""
    seen: set[int] = set()
    todo = [x]
    while todo:
        x = todo.pop()
        if direct(x):
            return True
        kind = type(x)
        if kind in _INERT or id(x) in seen or len(seen) >= _SCANNED:
            continue
        seen.add(id(x))
        if keeps_heap_metadata(ctx, x):
            return True
        if kind is dict:
            todo.extend(x.values())
        elif kind is list or kind is tuple or issubclass(kind, (list, tuple, set, frozenset)):
            todo.extend(x if len(x) <= _SCANNED else list(x)[:_SCANNED])
        elif kind.__flags__ & _HEAPTYPE and not issubclass(kind, _NOT_OBJECTS):
            todo.extend(held_by(x, kind))
    return False


def held_by(obj: Any, kind: type) -> list[Any]:
    """The values ``obj``, of the Python class ``kind``, holds itself: its ``__dict__``'s and
    its slots', read natively (no code of the user's class runs; an empty slot is left out)."""
    held: list[Any] = []
    try:
        own = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        own = None
    if type(own) is dict:
        held.extend(own.values())
    for klass in kind.__mro__:  # (slots: their descriptors)
        for slot in list(vars(klass).values()):
            if type(slot) is types.MemberDescriptorType and slot.__objclass__ is klass:
                try:
                    held.append(slot.__get__(obj, kind))
                except AttributeError:  # (an empty slot)
                    pass
    return held


def read_natively(ctx: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                  at: int | str, mode: str, run: Callable[..., Any]) -> Any:
    """``run(fn, *args, **kwargs)`` for a call :func:`native_holder` found (``at``: the
    argument): never a silent zero.  A cached function raises :class:`MissingRuleError` before
    it runs (the cache calls it natively, or hands back a value cached before: as for the
    differentiated value given itself).  Other C code runs, and raises if what it computed
    natively from the object -- its result, unless the function is one of the exemptions
    (``round``, ``math.isclose``, an integer cast: declared ``nondifferentiable``), or a
    differentiated value its Python methods used (stored as it is) -- could have carried a
    derivative."""
    kind = type(fn)
    if kind is _LRU_CACHE or kind is types.MethodType:
        raise _rules.missing(getattr(fn, "__func__", fn), at, mode, type(ctx).__name__)
    if fn is getattr:  # (a property's getter behind the cache, given the object)
        getter = getattr(type(args[0]), args[1]).fget
        raise _rules.missing(getter, at, mode, type(ctx).__name__)
    exempt = _rules.is_nondifferentiable(fn)
    beside = not exempt and any(
        type(a) is Tagged or (type(a) in (list, tuple) and Tagged in map(type, a))
        for a in (*args, *kwargs.values()))
    out: Any = None  # (beside a differentiated value -- x * seq, y[0] = obj, math.hypot(obj,
    # x) -- the rules would run, the object read natively a constant to them: refused before
    # anything runs)
    key = id(ctx)
    outer = _QUIET.get(key)
    quiet = _QUIET[key] = [0]
    try:
        if not beside:
            out = run(fn, *args, **kwargs)
    except TypeError as error:  # (a __float__ returning the value it holds as it is)
        if exempt or "Tagged" not in str(error):
            raise
        quiet[0] += 1
        out = None
    finally:
        if outer is None:
            del _QUIET[key]
        else:
            _QUIET[key] = outer
    if not beside and (exempt or not (
            quiet[0] or _written_array(fn, args) is not None or _is_value(out) or (
                type(out) in (tuple, list) and any(map(_is_value, out))))):
        return out
    given = args[at] if isinstance(at, int) else kwargs[at]
    given = next((a for a in given if _converts(type(a))), given) \
        if type(given) in (list, tuple) else given
    methods = [name for name in _CONVERSIONS
               if type(getattr(type(given), name, None)) in (types.FunctionType, property)]
    raise _rules.MissingRuleError(
        f"no {mode}-mode derivative through {describe(fn)}: it is C code given "
        f"{_rules._name(type(given))} (argument {at}), an object holding a differentiated "
        f"value, and runs its Python method{'s' if len(methods) > 1 else ''} "
        f"{', '.join(methods)} natively, behind {type(ctx).__name__}'s back: what they read "
        f"is a plain number there, and the result would drop the derivative. Convert the "
        f"object in the function you differentiate first (float(obj), complex(obj), "
        f"np.asarray(obj) are followed), or give the value itself")


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
    ``fn``, by its public name: ``scipy.linalg.solve_triangular`` for LAPACK's ``dtrtrs``,
    ``numpy.unique`` for ``numpy.lib._arraysetops_impl.unique``,
    ``scipy.interpolate.CubicSpline.__call__`` for the method it inherits from a private base
    class.  The outermost such function with a public name wins; None where ``fn`` was called
    by the user's code itself."""
    frame: types.FrameType | None = sys._getframe(1)
    calls: list[types.FrameType] = []  # library frames of public-looking functions, inner first
    while frame is not None:
        library = _is_library(frame)
        if library is False:
            break
        if library:
            code = frame.f_code
            name = getattr(code, "co_qualname", code.co_name)
            # not a decorator's wrapper, a closure or a private helper (a dunder is public)
            last = name.rpartition(".")[2]
            if "<" not in name and (not last.startswith("_") or _dunder(last)):
                calls.append(frame)
        frame = frame.f_back
    if not calls:
        return None
    for frame in reversed(calls):
        public = _frame_name(frame)
        if public is not None:
            break
    else:  # no public name: the outermost, under the package that exports its module's names
        code = calls[-1].f_code
        public = _public_path(calls[-1].f_globals.get("__name__", "") or "",
                              getattr(code, "co_qualname", code.co_name))
    return None if public == public_name(fn) else public


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _frame_name(frame: types.FrameType) -> str | None:
    """The public name of the function ``frame`` runs: a module-level function exported by a
    package above its module (matched by its code: ``numpy.unique`` is a dispatcher wrapping
    it), or a method named by its object's class or by the instance a package exports
    (``scipy.stats.expon.entropy`` for ``rv_generic.entropy``).  None: no public name."""
    code = frame.f_code
    module = frame.f_globals.get("__name__", "") or ""
    qualname = getattr(code, "co_qualname", code.co_name)
    if "." not in qualname:
        return _exported(module, qualname, lambda obj: _runs(obj, code, module, qualname))
    if not code.co_argcount:
        return None
    owner = frame.f_locals.get(code.co_varnames[0])  # self (cls: __new__, a classmethod)
    if owner is None:
        return None
    method = qualname.rpartition(".")[2]
    cls = owner if isinstance(owner, type) else type(owner)
    named = _exported(cls.__module__, cls.__qualname__, lambda obj: obj is cls)
    if named is None and cls is not owner:  # an instance a package exports (scipy.stats.expon)
        named = _instance(cls.__module__, owner)
    return None if named is None else f"{named}.{method}"


def _runs(obj: Any, code: types.CodeType, module: str, qualname: str) -> bool:
    """Whether the function ``obj`` (through decorators' ``__wrapped__``: NumPy's dispatchers)
    is the one whose code ``code`` runs.  Compared by file and name: under a context the
    frame runs a rewritten copy of the function's code."""
    if getattr(obj, "__module__", None) == module and \
            getattr(obj, "__qualname__", None) == qualname:
        return True
    for _ in range(8):
        if not hasattr(obj, "__wrapped__"):
            break
        obj = obj.__wrapped__
    own = getattr(obj, "__code__", None)
    return isinstance(own, types.CodeType) and own.co_filename == code.co_filename and \
        getattr(own, "co_qualname", own.co_name) == qualname


def _packages(module: str) -> list[tuple[str, Any]]:
    """The packages above ``module`` (outermost first) and ``module`` itself, as imported."""
    parts = module.split(".")
    found = []
    for n in range(1, len(parts) + 1):
        name = ".".join(parts[:n])
        package = sys.modules.get(name)
        if package is not None:
            found.append((name, package))
    return found


def _exported(module: str, qualname: str, same: Callable[[Any], bool]) -> str | None:
    """``package.qualname`` for the outermost public package above ``module`` (or ``module``
    itself; public: no part of either name starts with an underscore) in which ``qualname``
    leads to an object that is ``same``; None if there is none."""
    if any(part.startswith("_") for part in qualname.split(".")):
        return None
    for name, package in _packages(module):
        if any(part.startswith("_") for part in name.split(".")):
            continue
        obj = package
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if obj is not None and same(obj):
            return f"{name}.{qualname}"
    return None


def _instance(module: str, obj: Any) -> str | None:
    """``package.name`` of ``obj``, or of an instance of its class, that a public package above
    ``module`` exports (the frozen distribution's ``dist`` is a copy of ``scipy.stats.expon``)."""
    cls = type(obj)
    for name, package in _packages(module):
        if any(part.startswith("_") for part in name.split(".")):
            continue
        namespace = getattr(package, "__dict__", {})
        for attribute, value in namespace.items():
            if value is obj and not attribute.startswith("_"):
                return f"{name}.{attribute}"
        for attribute, value in namespace.items():
            if type(value) is cls and not attribute.startswith("_"):
                return f"{name}.{attribute}"
    return None


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
