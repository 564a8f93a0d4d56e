"""Python's operator protocols, in Python, for operands whose types define dunders in Python.

``operator.mul`` is C: called natively it would run a user's ``__mul__`` behind the context's
back.  When an operand's type defines the relevant dunder as a Python function, the dispatcher
runs the protocol below instead, which calls the dunder through the context (``od``), keeping
CPython's rules: reflected operands (the right operand first when its type is a proper subclass
that overrides the reflected method), ``NotImplemented`` fallbacks, in-place falling back to
binary, ``==`` falling back to identity, ``!=`` inverting ``__eq__``.  Each protocol returns
``None`` from :func:`protocol_for` when no Python dunder is involved, so the caller runs the C
operator natively (the fast, common case).
"""

from __future__ import annotations

import collections
import functools
import operator
import types
from collections.abc import Callable
from typing import Any

from ._tagging import Tagged

_Function = types.FunctionType
_Fn = Callable[..., Any]  # an operator, a protocol, or the context's step ``od``

_BINARY: dict[_Fn, tuple[str, str, str]] = {  # operator -> (dunder, reflected, symbol)
    operator.add: ("__add__", "__radd__", "+"), operator.sub: ("__sub__", "__rsub__", "-"),
    operator.mul: ("__mul__", "__rmul__", "*"), operator.matmul: ("__matmul__", "__rmatmul__", "@"),
    operator.truediv: ("__truediv__", "__rtruediv__", "/"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__", "//"),
    operator.mod: ("__mod__", "__rmod__", "%"),
    operator.pow: ("__pow__", "__rpow__", "** or pow()"),
    operator.lshift: ("__lshift__", "__rlshift__", "<<"),
    operator.rshift: ("__rshift__", "__rrshift__", ">>"),
    operator.and_: ("__and__", "__rand__", "&"), operator.or_: ("__or__", "__ror__", "|"),
    operator.xor: ("__xor__", "__rxor__", "^"),
    # builtins that run the same protocol: ``pow(a, b)``, ``divmod(a, b)``
    pow: ("__pow__", "__rpow__", "** or pow()"), divmod: ("__divmod__", "__rdivmod__", "divmod()"),
}
_INPLACE = {  # in-place operator -> (dunder, binary operator)
    operator.iadd: ("__iadd__", operator.add), operator.isub: ("__isub__", operator.sub),
    operator.imul: ("__imul__", operator.mul), operator.imatmul: ("__imatmul__", operator.matmul),
    operator.itruediv: ("__itruediv__", operator.truediv),
    operator.ifloordiv: ("__ifloordiv__", operator.floordiv),
    operator.imod: ("__imod__", operator.mod), operator.ipow: ("__ipow__", operator.pow),
    operator.ilshift: ("__ilshift__", operator.lshift),
    operator.irshift: ("__irshift__", operator.rshift),
    operator.iand: ("__iand__", operator.and_), operator.ior: ("__ior__", operator.or_),
    operator.ixor: ("__ixor__", operator.xor),
}
_COMPARE = {  # comparison -> (dunder, reflected dunder, symbol)
    operator.eq: ("__eq__", "__eq__", "=="), operator.ne: ("__ne__", "__ne__", "!="),
    operator.lt: ("__lt__", "__gt__", "<"), operator.le: ("__le__", "__ge__", "<="),
    operator.gt: ("__gt__", "__lt__", ">"), operator.ge: ("__ge__", "__le__", ">="),
}
_UNARY: dict[_Fn, str] = {operator.neg: "__neg__", operator.pos: "__pos__",
                          operator.invert: "__invert__"}
_SUBJECT: dict[_Fn, str] = {operator.getitem: "__getitem__", operator.setitem: "__setitem__",
                            operator.delitem: "__delitem__", operator.contains: "__contains__"}

_HEAPTYPE = 1 << 9
# C types (not heap types): their dunders can never be Python functions.  Grows as types are seen.
static_types: set[type] = {int, float, complex, bool, str, bytes, list, tuple, dict, set,
                           frozenset, type(None), types.ModuleType, type}


def python_mapping(x: Any) -> bool:
    """A mapping of a Python class that is no dict (``UserDict``, ``ChainMap``): what C code
    makes of it -- ``dict(m)``, ``{**m}``, ``f(**m)``, ``d.update(m)`` -- it reads through its
    ``keys`` and ``__getitem__``, calling them natively (a context would not see them)."""
    kind = type(x)
    return bool(kind.__flags__ & _HEAPTYPE) and not isinstance(x, dict) and \
        hasattr(kind, "keys") and hasattr(kind, "__getitem__")


def is_static(t: type) -> bool:
    """True for C types (cheap check, cached); their operators are always native.

    ``super`` is the exception: a C type whose attribute read runs the Python descriptor it
    finds in the classes after the one named (``super().energy``, a property): natively, its
    getter would run behind the context's back (see :func:`_super_get`)."""
    if t in static_types:
        return True
    if t.__flags__ & _HEAPTYPE or t is super:
        return False
    static_types.add(t)
    return True


# A class's own namespace, as CPython's attribute lookup reads it: ``klass.__dict__`` would run
# a metaclass's ``__dict__`` property, if it has one.
_namespace = type.__dict__["__dict__"].__get__


def lookup(t: type, name: str) -> Any:
    """The class attribute ``name`` as special-method lookup finds it (skipping the instance)."""
    for klass in t.__mro__:
        namespace = _namespace(klass)
        if name in namespace:
            return namespace[name]
    return None


def _python(t: type, name: str) -> bool:
    return isinstance(lookup(t, name), _Function)


def _defines(t: type, name: str) -> bool:
    """Whether ``t`` has the attribute at all: ``__iadd__ = None`` blocks ``+=`` (calling it is
    the TypeError), where :func:`lookup` alone cannot tell None from absent."""
    return any(name in _namespace(klass) for klass in t.__mro__)


def _subtype(t: type, of: type) -> bool:
    """A real subclass (what CPython's operators check), not a virtual one registered with an
    ABC, which ``issubclass`` would accept."""
    return of in t.__mro__


_METHOD_DESCRIPTOR = 1 << 17  # Py_TPFLAGS_METHOD_DESCRIPTOR: called unbound, with the object


def _call_dunder(od: _Fn, t: type, name: str, obj: Any, *args: Any) -> Any:
    """Call ``t``'s ``name`` for ``obj`` as CPython's special-method lookup does: a C method with
    the object first (for a class operand, ``int | UserId``, its metaclass's method, which
    ``getattr(obj, name)`` is not), another descriptor bound by its ``__get__``, any other value
    (``None`` blocking the operation) called with the arguments alone."""
    raw = lookup(t, name)
    if isinstance(raw, _Function):
        return od(raw, obj, *args)
    kind = type(raw)
    if kind.__flags__ & _METHOD_DESCRIPTOR:
        return raw(obj, *args)
    get = getattr(kind, "__get__", None)
    return (raw if get is None else get(raw, obj, t))(*args)


def _binary(od: _Fn, op: _Fn, a: Any, b: Any) -> Any:
    name, rname, symbol = _BINARY[op]
    ta, tb = type(a), type(b)
    a_has, b_has = _defines(ta, name), tb is not ta and _defines(tb, rname)
    if b_has and _numpy_scalar(ta) and _python(tb, rname) and _opaque_to_numpy(tb) and \
            op is not operator.matmul:  # (for @, NumPy's scalar gives up: Python calls tb's)
        # NumPy's scalar takes the object as a 0-d object array and applies the operator to
        # the scalar as a Python number, natively: the object's Python method, unseen
        return _binary(od, op, a.item(), b)
    if b_has and (_subtype(tb, ta) and lookup(tb, rname) is not lookup(ta, rname)
                  or id(lookup(ta, name)) in _SEQUENCE_SLOTS):
        # (a subclass's reflected method first; and before a C sequence's concatenation or
        # repetition, which CPython tries after both operands' numeric methods: [1] + obj
        # calls obj.__radd__, where list.__add__ would raise)
        out = _call_dunder(od, tb, rname, b, a)
        if out is not NotImplemented:
            return out
        b_has = False
    if a_has:
        out = _call_dunder(od, ta, name, a, b)
        if out is not NotImplemented:
            return out
    if b_has:
        out = _call_dunder(od, tb, rname, b, a)
        if out is not NotImplemented:
            return out
    raise TypeError(f"unsupported operand type(s) for {symbol}: "
                    f"'{ta.__name__}' and '{tb.__name__}'")


# The concatenation and repetition of C sequences (their sq_concat, sq_repeat and in-place
# slots): CPython tries both operands' numeric methods before them.
_SEQUENCE_SLOTS = frozenset(id(getattr(kind, name)) for kind in (
    list, tuple, str, bytes, bytearray, collections.deque)
    for name in ("__add__", "__mul__", "__iadd__", "__imul__") if name in vars(kind))


def _numpy_scalar(t: type) -> bool:
    return t.__module__ == "numpy" and any(k.__name__ == "generic" for k in t.__mro__)


# what makes NumPy read an object as an array or a sequence, or defer to it
_ARRAY_PROTOCOL = ("__array_ufunc__", "__array_function__", "__array__", "__array_interface__",
                   "__array_struct__", "__array_priority__", "__len__", "__getitem__",
                   "__iter__")


def _opaque_to_numpy(t: type) -> bool:
    """Whether NumPy takes an instance of ``t`` as a single object (a 0-d object array)."""
    return not any(_defines(t, name) for name in _ARRAY_PROTOCOL)


def _inplace(od: _Fn, op: _Fn, a: Any, b: Any) -> Any:
    name, binary = _INPLACE[op]
    ta = type(a)
    if id(lookup(ta, name)) in _SEQUENCE_SLOTS and _python(type(b), _BINARY[binary][1]):
        # a C sequence's in-place concatenation (list +=) comes after the numeric methods:
        # the other operand's reflected one first, as CPython does
        out = _call_dunder(od, type(b), _BINARY[binary][1], b, a)
        if out is not NotImplemented:
            return out
    if _defines(ta, name):
        out = _call_dunder(od, ta, name, a, b)
        if out is not NotImplemented:
            return out
    if _python(ta, _BINARY[binary][0]) or _python(type(b), _BINARY[binary][1]):
        return _binary(od, binary, a, b)
    return binary(a, b)


def _compare(od: _Fn, op: _Fn, a: Any, b: Any) -> Any:
    name, rname, symbol = _COMPARE[op]
    ta, tb = type(a), type(b)

    def attempt(t: type, dunder: str, x: Any, y: Any) -> Any:
        if dunder == "__ne__" and lookup(t, "__ne__") is object.__ne__ and _python(t, "__eq__"):
            out = _call_dunder(od, t, "__eq__", x, y)  # object.__ne__ inverts __eq__
            return out if out is NotImplemented else not out
        return _call_dunder(od, t, dunder, x, y)

    if tb is not ta and _subtype(tb, ta):
        out = attempt(tb, rname, b, a)
        if out is not NotImplemented:
            return out
        out = attempt(ta, name, a, b)
    else:
        out = attempt(ta, name, a, b)
        if out is NotImplemented:
            out = attempt(tb, rname, b, a)
    if out is not NotImplemented:
        return out
    if op is operator.eq:
        return a is b
    if op is operator.ne:
        return a is not b
    raise TypeError(f"'{symbol}' not supported between instances of "
                    f"'{ta.__name__}' and '{tb.__name__}'")


def _unary(od: _Fn, op: _Fn, a: Any) -> Any:
    return _call_dunder(od, type(a), _UNARY[op], a)


def _subject(od: _Fn, op: _Fn, obj: Any, *args: Any) -> Any:
    out = _call_dunder(od, type(obj), _SUBJECT[op], obj, *args)
    return bool(out) if op is operator.contains else out


def _getattr(od: _Fn, op: _Fn, obj: Any, name: str, *default: Any) -> Any:
    try:
        return _attribute_get(od, obj, name)
    except AttributeError:
        if default:
            return default[0]
        raise


def _attribute_get(od: _Fn, obj: Any, name: str) -> Any:
    t = type(obj)
    if t is super:
        found = _super_get(obj, name)
        if found is None:
            return getattr(obj, name)
        get, descriptor, bound, start = found
        return get(od, descriptor, bound, start)
    if _python(t, "__getattribute__"):
        try:
            return _call_dunder(od, t, "__getattribute__", obj, name)
        except AttributeError:
            if lookup(t, "__getattr__") is None:
                raise
            return _call_dunder(od, t, "__getattr__", obj, name)
    attr = lookup(t, name)
    getter = _python_get(attr)
    try:
        if getter is not None:
            is_data = hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")
            if is_data or name not in getattr(obj, "__dict__", {}):
                return getter(od, attr, obj, t)
        # the lookup without the __getattr__ fallback (getattr() would call a Python
        # __getattr__ natively, behind the context: a metaclass's, for a class): t is a
        # class, so t.__getattribute__ is the unbound slot (typeshed sees a bound method)
        return t.__getattribute__(obj, name)  # type: ignore[call-arg]
    except AttributeError:  # from the descriptor too, as type.__getattribute__ does
        if _python(t, "__getattr__"):
            return _call_dunder(od, t, "__getattr__", obj, name)
        raise


def _super_get(su: Any, name: str) -> tuple[_Fn, Any, Any, type] | None:
    """How to run ``su.name`` through the context where CPython's ``super.__getattribute__``
    would run Python code: (:func:`_python_get`'s getter, the class attribute found in the
    first class after ``__thisclass__`` in the MRO of the type ``su`` is bound to, the object
    its ``__get__`` gets (None when ``su`` is bound to that type itself), that type).  None
    where the read runs no Python code: ``su``'s own attributes (``__class__``, an unbound
    ``super``, a name no class after ``__thisclass__`` defines), an attribute whose
    ``__get__`` is C (a method, a classmethod), a property read through the class (the
    property itself).  Whatever it finds, a descriptor's ``__get__`` runs, data descriptor or
    not: ``super`` never looks in the instance's ``__dict__``."""
    start = su.__self_class__
    if start is None or name == "__class__":
        return None
    mro = start.__mro__
    if su.__thisclass__ not in mro:
        return None
    for klass in mro[mro.index(su.__thisclass__) + 1:]:
        namespace = _namespace(klass)
        if name in namespace:
            attr, bound = namespace[name], su.__self__
            bound = None if bound is start else bound
            getter = _python_get(attr)
            if getter is None or (bound is None and isinstance(attr, property)):
                return None
            return getter, attr, bound, start
    return None


def _python_get(attr: Any) -> _Fn | None:
    """How to run ``attr.__get__`` through the context when it is Python code."""
    if isinstance(attr, property):
        if isinstance(attr.fget, _Function):
            return lambda od, prop, obj, t: od(prop.fget, obj)
        return None
    if isinstance(lookup(type(attr), "__get__"), _Function):
        return lambda od, desc, obj, t: od(lookup(type(desc), "__get__"), desc, obj, t)
    return None


def _setattr(od: _Fn, op: _Fn, obj: Any, name: str, value: Any) -> None:
    t = type(obj)
    attr = lookup(t, name)
    if isinstance(attr, property) and isinstance(attr.fset, _Function):
        od(attr.fset, obj, value)
    elif attr is not None and isinstance(lookup(type(attr), "__set__"), _Function):
        od(lookup(type(attr), "__set__"), attr, obj, value)
    elif _python(t, "__setattr__"):
        od(lookup(t, "__setattr__"), obj, name, value)
    else:
        setattr(obj, name, value)


def _delattr(od: _Fn, op: _Fn, obj: Any, name: str) -> None:
    t = type(obj)
    attr = lookup(t, name)
    if isinstance(attr, property) and isinstance(attr.fdel, _Function):
        od(attr.fdel, obj)
    elif _python(t, "__delattr__"):
        od(lookup(t, "__delattr__"), obj, name)
    else:
        delattr(obj, name)


def _needs_binary(op: _Fn, args: tuple[Any, ...]) -> bool:
    name, rname, _ = _BINARY[op]
    return len(args) == 2 and (_python(type(args[0]), name) or _python(type(args[1]), rname))


def _needs_inplace(op: _Fn, args: tuple[Any, ...]) -> bool:
    return len(args) == 2 and (_python(type(args[0]), _INPLACE[op][0])
                               or _needs_binary(_INPLACE[op][1], args))


def _needs_compare(op: _Fn, args: tuple[Any, ...]) -> bool:
    name, rname, _ = _COMPARE[op]
    if len(args) != 2:
        return False
    return any(_python(type(x), d) or (d == "__ne__" and _python(type(x), "__eq__"))
               for x, d in ((args[0], name), (args[1], rname)))


def _attribute_hooks(t: type, name: str) -> tuple[Any, Any, Any]:
    """``lookup(t, n)`` for ``__getattribute__``, ``name`` and ``__getattr__``, in one walk of
    the MRO (an attribute read is the commonest operation on objects)."""
    getattribute = attr = hook = _ABSENT  # (a class attribute may be None: it hides a base's)
    for klass in t.__mro__:
        namespace = _namespace(klass)
        if getattribute is _ABSENT:
            getattribute = namespace.get("__getattribute__", _ABSENT)
        if attr is _ABSENT:
            attr = namespace.get(name, _ABSENT)
        if hook is _ABSENT:
            hook = namespace.get("__getattr__", _ABSENT)
    return getattribute, None if attr is _ABSENT else attr, hook


_ABSENT: Any = object()


def _instance_dict(obj: Any, t: type) -> Any:
    """``obj.__dict__`` as the usual lookup finds it, without calling a ``__getattr__``
    (empty for an object without one)."""
    descriptor = lookup(t, "__dict__")
    get = getattr(type(descriptor), "__get__", None)
    return () if get is None or _python_get(descriptor) is not None else get(descriptor, obj, t)


def _needs_attribute(op: _Fn, args: tuple[Any, ...]) -> bool:
    if not args or is_static(type(args[0])) or not (2 <= len(args) <= 3):
        return False
    obj, name = args[0], args[1]
    t = type(obj)
    if not isinstance(name, str):
        return False
    if t is super:  # (super() stores nothing: setattr and delattr act on the super object)
        return op is getattr and _super_get(obj, name) is not None
    if op is getattr:
        getattribute, attr, hook = _attribute_hooks(t, name)
        if isinstance(getattribute, _Function):
            return True
        # An attribute the instance holds is read as for any object (by the context's own
        # handling, which may keep metadata for it): __getattr__ runs only for a name the
        # usual lookup misses, and the instance's value hides a non-data descriptor (a
        # functools.cached_property once computed)
        if _python_get(attr) is not None:
            kind = type(attr)
            return hasattr(kind, "__set__") or hasattr(kind, "__delete__") or \
                name not in _instance_dict(obj, t)
        return isinstance(hook, _Function) and attr is None and \
            name not in _instance_dict(obj, t)
    attr = lookup(t, name)
    if op is setattr:
        return (_python(t, "__setattr__")
                or (isinstance(attr, property) and isinstance(attr.fset, _Function))
                or (attr is not None and isinstance(lookup(type(attr), "__set__"), _Function)))
    return _python(t, "__delattr__") or (isinstance(attr, property)
                                         and isinstance(attr.fdel, _Function))


# operator -> (does this call involve Python dunders?, protocol implementation)
_PROTOCOLS: dict[int, tuple[_Fn, _Fn]] = {}
_op: _Fn
_impl: _Fn
for _op in _BINARY:
    _PROTOCOLS[id(_op)] = (_needs_binary, _binary)
for _op in _INPLACE:
    _PROTOCOLS[id(_op)] = (_needs_inplace, _inplace)
for _op in _COMPARE:
    _PROTOCOLS[id(_op)] = (_needs_compare, _compare)
for _op, _name in _UNARY.items():
    _PROTOCOLS[id(_op)] = ((lambda op, args, n=_name: len(args) == 1 and _python(type(args[0]), n)),
                           _unary)
for _op, _name in _SUBJECT.items():
    _PROTOCOLS[id(_op)] = ((lambda op, args, n=_name: bool(args) and _python(type(args[0]), n)),
                           _subject)
for _op, _impl in ((getattr, _getattr), (setattr, _setattr), (delattr, _delattr)):
    _PROTOCOLS[id(_op)] = (_needs_attribute, _impl)


# operations on a subject (their first argument) whose other arguments may be tagged
_SUBJECT_IDS = frozenset(map(id, (*_SUBJECT, getattr, setattr, delattr)))


def protocol_for(od: _Fn, op: _Fn, args: tuple[Any, ...]) -> _Fn | None:
    """A callable running ``op(*args)`` with its Python dunders seen by ``od``, or None.

    Tagged values are left to the context's tag handling: their dunders are not user code.
    A tagged *argument* of a plain subject's Python method (``obj[key]``, ``obj[key] = v``,
    ``v in obj``, ``obj.attr = v`` through a property setter or ``__setattr__``) is passed to
    that method as it is, which then runs overdubbed like any other Python code: run natively,
    it would use the tagged value behind the context's back.
    """
    entry = _PROTOCOLS.get(id(op))
    if entry is None:
        return None
    if Tagged in map(type, args) and (id(op) not in _SUBJECT_IDS or type(args[0]) is Tagged):
        return None
    if not entry[0](op, args):
        return None
    return functools.partial(entry[1], od, op)

