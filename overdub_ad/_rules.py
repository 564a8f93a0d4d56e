"""Derivative-rule tables shared by forward and reverse mode.

A rule is registered per callable and per positional argument (autograd's design, which its
test suite exercises):

- ``defjvp(fn, *per_argument)`` -- forward mode.  For argument ``i`` give
  ``rule(dx, out, *args, **kwargs) -> tangent contribution`` where ``dx`` is argument ``i``'s
  tangent; the output tangent is the sum of the contributions of the arguments that carry a
  tangent.  Tangents may have extra *leading* batch dimensions (``dx.shape == B + shape(x)``,
  used by ``jacfwd`` to push several directions at once): the shipped rules use negative axes
  and broadcasting so they work for any ``B``; a user's rule runs once per direction (see
  :func:`_per_direction`).
- ``defvjp(fn, *per_argument)`` -- reverse mode.  For argument ``i`` give
  ``rule(ct, out, *args, **kwargs) -> cotangent for argument i``.  The engine sums away
  broadcast dimensions (and drops the imaginary part for real arguments), so a rule may return
  the cotangent at the broadcast shape.

In place of a rule, ``ZERO`` says the argument has no derivative (an integer, a shape, an
index) and ``LINEAR`` says ``fn`` is linear in it, the other arguments held as parameters:
its tangent is ``fn`` applied to the tangent, with the call's keywords (forward mode only;
reverse mode needs the explicit transpose).  Because the tangent may carry leading batch
dimensions, ``LINEAR`` is right only where ``fn`` treats leading dimensions as a stack and
takes no ``out=`` buffer (``operator.neg``, ``np.real``, ``np.matrix_transpose``); ``reshape``,
``sum(axis=0)`` or ``x * y`` with broadcasting need a written rule.  ``None`` for an argument
means "no rule registered": differentiating through it raises :class:`MissingRuleError`.

A rule wrapped in :class:`Carried` is also told which arguments carry a derivative in the
call (the non-smooth functions need it: at a tie of ``max(x, 0.0)`` the constant wins, so
``relu'(0) = 0``, while a tie between two differentiated arguments splits evenly).

``nondifferentiable(fn, ...)`` lists functions whose derivative is zero almost everywhere
(``floor``, ``sign``, comparisons, ``argmax``): every mode passes them through, giving zero
tangents and cotangents.

The user's rules win on every route.  The fast routes write some shipped rules out as formulas
(the scalar partials of reverse mode, the dual's arithmetic, the second-order kinds of the
tape ``hvp``, the compiled ``hvp``, reverse mode's quick rules); what they write out is declared
beside the rules in ``rules/`` -- the shape of an operator's partials (:func:`defscalar`,
:func:`scalar_shape`: the code generators implement shapes, not operators), derivatives of
elementwise functions (:func:`defelementwise`), faster equivalents of reverse rules
(:func:`defquick`).  :func:`mark_shipped` records the rules overdub_ad ships, and such a
declaration is used only while :func:`is_shipped` says its function still has them: tables of
formulas are rebuilt through :func:`on_change`, generated code is made again when
:data:`version` moves, and code that wrote operators out declines while :data:`overridden`
names one of them.

Complex numbers follow autograd and JAX: rules for holomorphic functions are written as for
reals (``ct * cos(x)``); for a real-valued ``f`` of ``z = x + iy`` the gradient is
``df/dx - i df/dy``.  Rule modules state their abbreviations: ``x, y`` arguments, ``out`` the
primal output, ``dx`` a tangent, ``ct`` a cotangent.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import Tagged, unbind, why_no_source

from ._pytree import flatten, unflatten


class _Marker:
    def __init__(self, name: str, meaning: str) -> None:
        self.name = name
        self.__doc__ = meaning

    def __repr__(self) -> str:
        return self.name


ZERO = _Marker("ZERO", "this argument has no derivative (integer, shape, index)")
LINEAR = _Marker("LINEAR", "fn is linear in this argument: its tangent is fn(tangent, ...)")


def passed(ct: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
    """The reverse rule of an argument that the output is up to broadcasting (``x`` in
    ``x + y``): the cotangent itself.  A sweep under an enclosing context hands it on without
    the call, which there would be a dispatch that computes nothing."""
    return ct


class Carried:
    """A rule that must know which arguments carry a derivative (ties of ``max``, ``min``,
    ``clip``...): engines call ``rule.rule(carried, d, out, *args, **kwargs)``.

    ``carried`` has one entry per positional argument of the call: True or False, or for a
    list or tuple argument a tuple with one such entry per element (see :func:`is_carried`).
    Called as a plain rule, ``rule(d, out, *args, **kwargs)``, every argument counts as
    carried (what a numerical check of the rule assumes).
    """

    __slots__ = ("rule",)

    def __init__(self, rule: Any) -> None:
        self.rule = rule

    def __call__(self, d: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.rule(ALL_CARRIED, d, out, *args, **kwargs)


ALL_CARRIED = _Marker("ALL_CARRIED", "every argument of the call carries a derivative")


def is_carried(carried: Any, i: int, j: int | None = None) -> bool:
    """Whether argument ``i`` (element ``j`` of it, for a list or tuple argument) carries a
    derivative, given the ``carried`` of a :class:`Carried` rule."""
    if carried is ALL_CARRIED:
        return True
    flag = carried[i] if i < len(carried) else False
    if type(flag) is tuple:
        return flag[j] if j is not None else any(flag)
    return bool(flag)


def carried_pattern(parts: Any) -> tuple[Any, ...]:
    """``carried`` for a call whose arguments' tangents (cotangent nodes) are ``parts``: None
    for an argument without one, a list or tuple for a container argument."""
    return tuple(tuple(e is not None for e in p) if type(p) in (list, tuple) else p is not None
                 for p in parts)


class MissingRuleError(TypeError):
    """A differentiated value reached a function with no derivative rule for that argument."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        for made in _RUNNING.get():  # (each running derivative notes it: see caught_missing)
            made.append(self)


# The derivatives running in this thread (task), outermost first: each one's list of the
# MissingRuleErrors made while it runs.  One the program caught (an ``except Exception``
# around the call) must not turn into a derivative computed without it: see caught_missing.
_RUNNING: contextvars.ContextVar[tuple[list[MissingRuleError], ...]] = \
    contextvars.ContextVar("overdub_ad_running", default=())


def running_derivative() -> tuple[list[MissingRuleError], contextvars.Token[Any]]:
    """Note that a derivative begins (a public entry point's call): the list its
    MissingRuleErrors go to, and the token that ends it (``_RUNNING.reset``)."""
    made: list[MissingRuleError] = []
    return made, _RUNNING.set((*_RUNNING.get(), made))


def caught_missing(made: list[MissingRuleError]) -> MissingRuleError:
    """The error for a derivative that returned although a MissingRuleError was raised while
    it ran (``made``): the program caught it, so its result was computed without that
    derivative -- never a silent wrong one."""
    first = made[0]
    error = MissingRuleError(
        f"a MissingRuleError was raised inside the differentiated function and caught there "
        f"(by an except clause), so the function went on without that derivative and the "
        f"result cannot be trusted; the error was: {first}")
    error.__cause__ = first
    return error


def forget_missing(mark: list[int]) -> None:
    """A route that tried the program and declines (another route runs it again, and raises
    if a rule is missing) drops the MissingRuleErrors made since ``mark``
    (:func:`missing_mark`): they were not the program's to catch."""
    for made, length in zip(_RUNNING.get(), mark):
        del made[length:]


# What a derivative rule may raise at a point where its partial is infinite or undefined
# (``0.5 / out`` of Python floats at ``sqrt(0)``, ``math.sqrt(1 - x * x)`` past the domain by
# rounding, NumPy's errors under ``np.errstate(all="raise")``, its warnings made errors).
# Raised while the program runs, it would reach the program's own ``except`` clauses, and the
# function would take a branch it never takes natively: a silent wrong derivative.
RULE_FAILURES = (ArithmeticError, ValueError, Warning)


def computed_as_ieee(fn: Any, error: BaseException, compute: Any, *args: Any) -> Any:
    """``compute(*args)`` -- a derivative rule's terms, which raised ``error`` -- again with
    NumPy's floating-point errors and warnings ignored, so that an infinite or undefined
    partial is the inf or nan NumPy gives, as JAX and PyTorch give it.  Where it raises again
    (Python float arithmetic: ``1.0 / 0.0``), a MissingRuleError chained to ``error``, which
    the derivative raises when it returns even if the program catches it here.  (A
    ValueError other than ``math``'s domain error is the rule's own report -- a user rule's
    check of its arguments -- and propagates as it is.)"""
    if isinstance(error, ValueError) and str(error) != "math domain error":
        raise error
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compute(*args)
    except RULE_FAILURES:
        pass
    from ._callbacks import public_name  # (reads the stack: on an error only)
    failure = _failure_type(type(error))(
        f"the derivative rule of {public_name(fn)} failed at this point ({type(error).__name__}: "
        f"{error}); its derivative there is infinite or undefined")
    raise failure from error


_FAILURE_TYPES: dict[type, type] = {}


def _failure_type(kind: type) -> type:
    """A MissingRuleError that is a ``kind`` too (``ZeroDivisionError``): what the rule raised
    is still what a program or test expecting it catches, and the derivative raises it when
    it returns even if the function caught it (see caught_missing)."""
    made = _FAILURE_TYPES.get(kind)
    if made is None:
        made = _FAILURE_TYPES[kind] = type(f"MissingRuleError_{kind.__name__}",
                                           (MissingRuleError, kind), {"__module__": __name__})
    return made


def missing_mark() -> list[int]:
    return [len(made) for made in _RUNNING.get()]


class _Entry:
    __slots__ = ("fn", "jvps", "vjps")

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.jvps: tuple[Any, ...] = ()
        self.vjps: tuple[Any, ...] = ()


_TABLE: dict[int, _Entry] = {}  # id(fn) -> rules; fn kept alive by the entry
_NONDIFFERENTIABLE: dict[int, Any] = {}
_lock = threading.Lock()
# Bumped by every registration (defjvp, defvjp, nondifferentiable), after the tables changed:
# an engine that keeps what it looked up in them (its plan for recording a call) trusts the
# plan while the version it was made at is still this one, without reading the tables again.
# Code that changes the tables otherwise (a test swapping in a copy) calls _changed() too.
version = 0
# id(fn) -> (fn, forward rules, reverse rules, declared nondifferentiable) as overdub_ad ships
# them, recorded by mark_shipped: the fast routes' formulas are derived from these rules.
_SHIPPED_RULES: dict[int, tuple[Any, Any, Any, bool]] = {}
# ids of shipped functions whose rules are not the shipped ones now (the user registered their
# own): a fast route that wrote out a shipped formula declines for them.  Recomputed by
# _changed(); empty unless the user re-registered a shipped function.
overridden: frozenset[int] = frozenset()
# Called (without arguments) after every change of the tables: what rebuilds the fast routes'
# tables, derived from the shipped rules still in force (see on_change).
_LISTENERS: list[Any] = []


def _changed() -> None:
    global version, overridden
    if _SHIPPED_RULES:
        overridden = frozenset(key for key, (fn, *_) in _SHIPPED_RULES.items()
                               if not is_shipped(fn))
    version += 1
    for rebuild in list(_LISTENERS):
        rebuild()


def on_change(rebuild: Any) -> Any:
    """Call ``rebuild()`` now and after every change of the tables; returns ``rebuild``.

    A fast route keeps a table of formulas written out for shipped rules (the scalar partials
    of ``math.sin``, the second-order kinds of ``np.tanh``); ``rebuild`` fills it with the
    entries whose function :func:`is_shipped` still holds, so that a rule the user registers
    wins on that route too, with no check per call."""
    _LISTENERS.append(rebuild)
    rebuild()
    return rebuild


class _Shape:
    """A declared shape of a rule's partial derivatives on floats (see :func:`defscalar`).

    The fast routes' code generators implement shapes, not operators: each asks
    :func:`scalar_shape` for an operator's shape and writes the code of that shape, or declines
    for a shape it does not implement (and for None: the user replaced the rules).  A shape
    other than :data:`BILINEAR` carries its partials ``partials(a, b, out, da, db) -> (pa, pb)``
    (None: a point the rules decide), written beside the rules in ``rules/`` and given to it
    by :func:`defshape`; calling the shape calls them.  ``second(a, b, out, da, db) -> (pa,
    pb, haa, hab, hbb)``, the partials and second partials, is what the routes that write
    Hessian-vector products out compute with (None: a point the rules decide)."""

    __slots__ = ("name", "partials", "second")

    def __init__(self, name: str) -> None:
        self.name = name
        self.partials: Any = None
        self.second: Any = None

    def __repr__(self) -> str:
        return self.name

    def __call__(self, a: Any, b: Any, out: Any, da: bool, db: bool) -> Any:
        return self.partials(a, b, out, da, db)


#: The partials of a product ``a * b``: ``(b, a)``.
BILINEAR = _Shape("BILINEAR")
#: The partials of a quotient ``a / b``: ``(1 / b, -out / b)``; none at ``b == 0``.
QUOTIENT = _Shape("QUOTIENT")
#: The partials of a power ``a ** b``: ``(b a^(b-1), out log a)``; ``0`` in ``a`` for
#: ``b == 0`` and in ``b`` for ``a == 0``; none at ``a == 0`` for ``b < 1`` (in ``a``) nor for
#: ``a < 0`` (in ``b``).
POWER = _Shape("POWER")
# id(fn) -> (fn, number of arguments, declared partials)
_SCALAR_PARTIALS: dict[int, tuple[Any, int, Any]] = {}


def defshape(shape: _Shape, partials: Any, second: Any) -> None:
    """Give ``shape`` its partials on floats, ``partials(a, b, out, da, db)``, and its partials
    with its second partials, ``second(a, b, out, da, db)`` (written in ``rules/``, where every
    formula is): what a route that does not write the shape out (reverse mode's recorded float
    arithmetic, the dual's boxed numbers, hvp's scalar tapes) computes with."""
    shape.partials = partials
    shape.second = second


def defscalar(fn: Any, arity: int, partials: Any) -> None:
    """Declare, beside ``fn``'s shipped rules (in ``rules/``), its partial derivatives on
    Python floats, for the fast routes that record float arithmetic without running the rules:

    - one argument: ``partials(x, out)``, the derivative;
    - two: a tuple of constants (a linear rule: ``(1.0, -1.0)`` for ``a - b``), a shape
      (:data:`BILINEAR`, :data:`QUOTIENT`, :data:`POWER`), or ``partials(a, b, out, da, db)
      -> (pa, pb)`` (``da``/``db``: whether that argument is differentiated).

    ``None`` from a partials function hands the point back to the rules (a domain edge where
    the rules decide).  A declaration is used only while ``fn``'s rules are the shipped ones
    (:func:`scalar_partials`, :func:`scalar_shape`): a rule the user registers wins on the
    fast routes too."""
    _SCALAR_PARTIALS[id(fn)] = (fn, arity, partials)


def declared_partials() -> list[tuple[Any, int, Any]]:
    """Every :func:`defscalar` declaration, as ``(fn, arity, partials)``."""
    return list(_SCALAR_PARTIALS.values())


def scalar_partials(arity: int) -> dict[int, Any]:
    """``id(fn) -> partials`` declared by :func:`defscalar` for ``arity`` arguments, for the
    functions whose rules are still the shipped ones: a shape's partials function in place of
    the shape (called per operation, without the shape's indirection), :data:`BILINEAR` and
    tuples of constants as declared."""
    return {key: partials.partials if type(partials) is _Shape and partials.partials is not None
            else partials
            for key, (fn, n, partials) in _SCALAR_PARTIALS.items()
            if n == arity and is_shipped(fn)}


def scalar_shape(fn: Any) -> Any:
    """The shape of ``fn``'s partials on floats as declared beside its shipped rules (a tuple
    of constants, :data:`BILINEAR`, :data:`QUOTIENT`, :data:`POWER`, or a partials function),
    or None: nothing declared, or ``fn``'s rules are not the shipped ones now (the user
    registered their own), so a route that writes the partials out must decline."""
    found = _SCALAR_PARTIALS.get(id(fn))
    if found is None or found[0] is not fn or not is_shipped(fn):
        return None
    return found[2]


# id(fn) -> (fn, the test of a call, the rules to record instead, second order allowed)
_QUICK: dict[int, tuple[Any, Any, tuple[Any, ...], bool]] = {}


def defquick(fn: Any, applies: Any, vjps: tuple[Any, ...], second_order: bool = False) -> None:
    """Declare, beside ``fn``'s shipped reverse rules, rules ``vjps`` that give the same
    numbers with fewer operations for the commonest calls: those ``applies(mask, primals,
    kwargs)`` accepts (``mask``: bit ``i`` set when argument ``i`` is differentiated).
    ``second_order``: whether the tapes of ``hvp`` may record them too (their route must then
    know them: it reads them with :func:`quick`).  Used only while ``fn``'s rules are the
    shipped ones (:func:`quick_rules`)."""
    _QUICK[id(fn)] = (fn, applies, vjps, second_order)


def quick(fn: Any) -> tuple[Any, tuple[Any, ...], bool] | None:
    """``(applies, vjps, second_order)`` declared for ``fn`` by :func:`defquick`, or None."""
    found = _QUICK.get(id(fn))
    return None if found is None or found[0] is not fn else found[1:]


def quick_rules() -> dict[int, tuple[Any, Any, tuple[Any, ...], bool]]:
    """``id(fn) -> (fn, applies, vjps, second_order)``: the :func:`defquick` declarations of
    the functions whose rules are still the shipped ones."""
    return {key: entry for key, entry in _QUICK.items() if is_shipped(entry[0])}


# id(fn) -> (fn, first derivative, second derivative), each ``(x, out)``
_ELEMENTWISE: dict[int, tuple[Any, Any, Any]] = {}


def defelementwise(fn: Any, first: Any, second: Any) -> None:
    """Declare, beside the shipped rules of the elementwise ``fn(x)`` (in ``rules/``), its
    first and second derivatives ``first(x, out)`` and ``second(x, out)`` on arrays, for the
    routes that write Hessian-vector products out (the tangent of ``ct * f'(x)`` is
    ``dct * f'(x) + ct * f''(x) * dx``).  Used only while ``fn``'s rules are the shipped
    ones (:func:`declared_elementwise`)."""
    _ELEMENTWISE[id(fn)] = (fn, first, second)


def declared_elementwise() -> dict[int, tuple[Any, Any, Any]]:
    """``id(fn) -> (fn, first, second)``, every :func:`defelementwise` declaration (a route
    uses one only while no shipped rule is replaced: a second derivative restates the
    derivative of a shipped rule's code, which computes with other shipped functions,
    ``ct * np.cos(x)`` for ``np.sin``; hvp's fast routes decline then)."""
    return dict(_ELEMENTWISE)


def is_shipped(fn: Any) -> bool:
    """Whether ``fn``'s rules (forward, reverse, and its nondifferentiable declaration) are
    the very ones overdub_ad ships: what a formula written out for ``fn`` by a fast route was
    derived from.  False for a function without shipped rules."""
    found = _SHIPPED_RULES.get(id(fn))
    if found is None or found[0] is not fn:
        return False
    return (jvp_rules(fn) is found[1] and vjp_rules(fn) is found[2]
            and is_nondifferentiable(fn) is found[3])


# id(fn) -> (fn, whether its output was one the dual route follows: a number, an array, a
# tuple of them) for the Python functions with the user's rules that the general forward mode
# ran.  The dual route runs such a function only once this is known: a stop on its output,
# after the call, would have the general mode run it again, and its effects twice.
_OUTPUT_FOLLOWED: dict[int, tuple[Any, bool]] = {}


def note_output(fn: types.FunctionType, followed: bool) -> None:
    """Note what ``fn``, a Python function with the user's rules, returned (see above)."""
    _OUTPUT_FOLLOWED[id(fn)] = (fn, followed)


def output_followed(fn: types.FunctionType) -> bool | None:
    """Whether ``fn``'s output was one the dual route follows; None before its first run."""
    found = _OUTPUT_FOLLOWED.get(id(fn))
    return None if found is None or found[0] is not fn else found[1]


def any_overridden(fns: frozenset[int]) -> bool:
    """Whether one of the functions with these ids has rules other than the shipped ones (a
    route that wrote their formulas out declines then)."""
    return bool(overridden) and not overridden.isdisjoint(fns)


def _name(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or ""
    module = {"_operator": "operator", "numpy.core.umath": "numpy", "builtins": ""}.get(module,
                                                                                       module)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    if not module:  # a ufunc says no module (scipy.special.sindg): where the user found it
        module = next((package for package in ("numpy", "scipy.special",
                                                       "numpy.linalg._umath_linalg")
                       if getattr(sys.modules.get(package), name, None) is fn), "")
    if type(fn).__name__ == "fortran":  # an f2py routine, named "function dgesdd"
        name = name.rpartition(" ")[2]
    return f"{module}.{name}" if module else name


def _check(kind: str, fn: Any, rules: tuple[Any, ...]) -> None:
    if not callable(fn):
        raise TypeError(f"{kind}: {fn!r} is not callable")
    for i, rule in enumerate(rules):
        if not (rule is None or rule is ZERO or rule is LINEAR or callable(rule)):
            raise TypeError(f"{kind}({_name(fn)}): the rule for argument {i} must be callable, "
                            f"ZERO, LINEAR or None, got {rule!r}")


def _entry(fn: Any) -> _Entry:
    entry = _TABLE.get(id(fn))
    if entry is None or entry.fn is not fn:
        entry = _TABLE[id(fn)] = _Entry(fn)
    return entry


def _classmethod_of(cls: type, method: types.MethodType) -> bool:
    """Whether ``method`` (bound to the class ``cls``) is a classmethod that ``cls`` defines or
    inherits, rather than a method of its metaclass."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(method.__name__)
        if found is not None:
            return type(found) is classmethod and found.__func__ is method.__func__
    return False


def _target(kind: str, fn: Any) -> tuple[Any, int]:
    """What a registration for ``fn`` is stored under, the function the engines look up when
    it is called, and how many arguments that function takes before the ones the user's rules
    are written for (1: the class of a classmethod).

    - a staticmethod object (``Cls.__dict__["f"]``, or met in a class body): its function,
      which is what ``Cls.f`` gives;
    - a classmethod as ``Cls.cm`` (a method bound to the class): its function, as Python runs
      ``Cls.cm(x)``, ``cm.__func__(Cls, x)`` (subclasses that inherit ``cm`` included);
    - a method bound to an object (``model.act``, ``random.uniform``, ``np.add.reduce``):
      refused, as is a classmethod object, which cannot be called.  A call of a bound method
      runs its class's method with the object first, and the rules looked up are that
      method's: what to register instead is said in the error."""
    if type(fn) is staticmethod:
        return fn.__func__, 0
    if type(fn) is classmethod:
        func = getattr(fn, "__func__", None)
        raise TypeError(
            f"{kind}: {fn!r} is a classmethod object, which is not what a call runs; register "
            f"the method as its class gives it, {kind}(Cls.{getattr(func, '__name__', 'name')}"
            f", ...), with rules for its arguments after the class")
    if type(fn) is types.MethodType:
        owner = fn.__self__
        if isinstance(owner, type) and _classmethod_of(owner, fn):
            return fn.__func__, 1
        method = _name(fn.__func__)
        raise TypeError(
            f"{kind}({method} bound to {_short(owner)}): rules are looked up for the function a "
            f"call runs, and calling a bound method runs its class's function with the object "
            f"first; register {method} itself, with a ZERO rule (or a rule) for that first "
            f"argument: {kind}({method}, ZERO, <your rules>), each rule receiving the object "
            f"after `out`, for every object of the class; or, for this object only, call it "
            f"through a function of your own (def f(y): return obj.method(y)) and register "
            f"that function")
    if type(fn) in (types.BuiltinMethodType, types.MethodWrapperType):
        owner = fn.__self__
        if owner is not None and not isinstance(owner, (types.ModuleType, type)):
            name = getattr(fn, "__name__", "method")
            raise TypeError(
                f"{kind}({_short(owner)}.{name}): a rule for a C method bound to an object is "
                f"not looked up (a call runs {_name(type(owner))}.{name} with the object "
                f"first); register {_name(type(owner))}.{name} with a rule (or ZERO) for the "
                f"object first, or call it through a function of your own and register that "
                f"function")
    return fn, 0


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _arity(fn: Any, skip: int) -> tuple[list[inspect.Parameter], bool] | None:
    """The positional parameters of the Python function ``fn`` after the first ``skip`` (the
    class of a classmethod), and whether it takes ``*args``; None where not inspectable."""
    if type(fn) is not types.FunctionType:
        return None
    signature = _signature(fn)
    if signature is None:
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in signature.parameters.values() if p.kind in kinds][skip:]
    varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL
                  for p in signature.parameters.values())
    return positional, varargs


def _callable_as_rule(rule: Any, lead: int, params: list[inspect.Parameter],
                      varargs: bool) -> bool:
    """Whether ``rule`` can be called as the engines call it, with ``lead`` arguments (``d,
    out``, and ``carried`` first for :class:`Carried`) and then the call's: some of the
    function's ``params`` given by position, the required ones after them by keyword."""
    signature = _signature(rule)
    if signature is None:
        return True
    required = [p for p in params if p.default is inspect.Parameter.empty]
    first = sum(1 for p in required if p.kind is inspect.Parameter.POSITIONAL_ONLY)
    last = len(params) + (len(signature.parameters) if varargs else 0)
    for given in range(first, last + 1):
        keywords = {p.name: None for p in required[given:]}
        try:
            signature.bind(*([None] * (lead + given)), **keywords)
        except TypeError:
            continue
        return True
    return False


def _check_arity(kind: str, fn: Any, target: Any, skip: int, rules: tuple[Any, ...]) -> None:
    """A registration's rules checked against the function's signature, where Python can read
    it: no more rules than positional parameters (without ``*args``), and each rule able to
    take ``(d, out, *args)`` (a rule that forgot ``out`` fails here, naming the function)."""
    found = _arity(target, skip)
    if found is None:
        return
    params, varargs = found
    names = ", ".join(p.name for p in params)
    if not varargs and len(rules) > len(params):
        raise TypeError(f"{kind}({_name(fn)}): {len(rules)} rules for a function of "
                        f"{len(params)} positional parameter{'s' * (len(params) != 1)} "
                        f"({names}); give one rule (or ZERO, or None) per positional argument")
    d = "dx" if kind == "defjvp" else "ct"
    for i, rule in enumerate(rules):
        if rule is None or rule is ZERO or rule is LINEAR:
            continue
        carried = type(rule) is Carried
        inner = rule.rule if carried else rule
        if not _callable_as_rule(inner, 3 if carried else 2, params, varargs):
            shown = _signature(inner)
            expected = ("carried, " if carried else "") + f"{d}, out" + \
                "".join(f", {p.name}" for p in params)
            raise TypeError(f"{kind}({_name(fn)}): the rule for argument {i}, "
                            f"{getattr(inner, '__name__', 'rule')}{shown}, cannot be called as "
                            f"rule({expected}): a rule receives the "
                            f"{'tangent' if d == 'dx' else 'cotangent'} and the primal output "
                            f"first, then the call's arguments")


def _is_numeric(value: Any) -> bool:
    return type(value) in (float, int, complex, bool) or isinstance(value,
                                                                   (np.ndarray, np.generic))


def _checked(kind: str, fn: Any, i: int, rule: Any) -> Any:
    """``rule`` (a user's, for argument ``i`` of ``fn``) with its result checked where that is
    cheap, for arrays and numbers: a tangent must have the output's shape (with the tangent's
    leading batch dimensions; broadcasting to it is allowed), a cotangent a shape that
    broadcasts with its argument's (the engines sum broadcast dimensions away).  A string, a
    shape that cannot be the derivative's, raises an error naming the function and the rule
    rather than giving a wrong derivative or an error from deep inside the engine."""
    if rule is None or rule is ZERO or rule is LINEAR or getattr(
            rule.rule if type(rule) is Carried else rule, "_overdub_checked", None) is not None:
        return rule
    forward = kind == "defjvp"
    if type(rule) is Carried:
        inner = rule.rule

        def checked_carried(carried: Any, d: Any, out: Any, /, *args: Any,
                            **kwargs: Any) -> Any:
            batch = _directions(forward, i, d, out, args)
            if batch:
                return _per_direction(functools.partial(checked_carried, carried), batch, d,
                                      out, args, kwargs, i)
            result = inner(carried, d, out, *args, **kwargs)
            if i < len(args):
                _check_result(kind, fn, i, forward, result, d, out, args[i])
            return result
        return Carried(_named(checked_carried, inner))

    def checked(d: Any, out: Any, /, *args: Any, **kwargs: Any) -> Any:
        batch = _directions(forward, i, d, out, args)
        if batch:
            return _per_direction(checked, batch, d, out, args, kwargs, i)
        result = rule(d, out, *args, **kwargs)
        if i < len(args):
            _check_result(kind, fn, i, forward, result, d, out, args[i])
        return result
    return _named(checked, rule)


def _directions(forward: bool, i: int, d: Any, out: Any, args: tuple[Any, ...]
                ) -> tuple[int, ...]:
    """The batch of directions (jacfwd's) that the tangent ``d`` of argument ``i`` carries in
    front of the argument's shape (of each of its leaves, for a pytree argument), for numbers
    and arrays; ``()`` for one direction (and for reverse rules and other values)."""
    if not forward or i >= len(args):
        return ()
    x = args[i]
    if _is_numeric(_inner(d)) and _is_numeric(_inner(x)):
        pairs: Any = ((_inner(x), _inner(d)),)
    else:
        xs, ds = flatten(x)[0], flatten(d)[0]
        if len(xs) != len(ds):
            return ()
        pairs = [(_inner(x), _inner(t)) for x, t in zip(xs, ds) if t is not None]
    batch = None
    for x, t in pairs:
        if not (_is_numeric(x) and _is_numeric(t)):
            return ()
        lead: int = np.ndim(t) - np.ndim(x)
        if lead > 0 or np.ndim(t):  # (0.0: a zero tangent of any shape, no batch)
            found = tuple(np.shape(t)[:max(lead, 0)])
            if batch is not None and found != batch:
                return ()
            batch = found
    if not batch or not all(_is_numeric(_inner(o)) for o in flatten(out)[0]):
        return ()
    return batch


def _inner(x: Any) -> Any:
    """The value under an enclosing derivative's tags."""
    while type(x) is Tagged:
        x = x.value
    return x


def _per_direction(rule: Any, batch: tuple[int, ...], d: Any, out: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any], i: int) -> Any:
    """A user's forward rule (checked) under a batch of directions: run once per direction,
    its tangents stacked in front of the output's shape (of each leaf of a pytree output).
    A rule written for one direction (``A @ dx``, ``x * np.sum(dx)``) would mix the
    directions of a batched tangent, silently; custom_jvp's rules run so too.  The shipped
    rules are written for batches and stay batched."""
    xs, ds = flatten(args[i])[0], flatten(d)
    single = len(xs) == 1 and xs[0] is args[i]
    parts = []
    for at in np.ndindex(batch):
        one = [t if t is None or np.ndim(_inner(t)) - np.ndim(_inner(x)) != len(batch) else
               t[at] for x, t in zip(xs, ds[0])]
        parts.append(rule(one[0] if single else unflatten(ds[1], one), out, *args, **kwargs))
    if all(p is None for p in parts):
        return None  # (no contribution)
    outs, tree = flatten(out)
    columns = [flatten(p)[0] if p is not None else [None] * len(outs) for p in parts]
    stacked = []
    for k, o in enumerate(outs):
        shape = np.shape(_inner(o))
        leaf = [column[k] for column in columns]
        stacked.append(None if all(t is None for t in leaf) else np.reshape(np.stack([
            np.zeros(shape) if t is None else t if np.shape(_inner(t)) == shape else
            np.broadcast_to(t, shape) for t in leaf]), batch + shape))
    return stacked[0] if len(outs) == 1 and outs[0] is out else unflatten(tree, stacked)


def _named(wrapper: Any, rule: Any) -> Any:
    """``wrapper`` named as the rule it checks, and marked as checked."""
    wrapper._overdub_checked = rule
    wrapper.__name__ = getattr(rule, "__name__", "rule")
    wrapper.__qualname__ = getattr(rule, "__qualname__", wrapper.__name__)
    wrapper.__doc__ = getattr(rule, "__doc__", None)
    wrapper.__wrapped__ = rule
    return wrapper


def _check_result(kind: str, fn: Any, i: int, forward: bool, result: Any, d: Any, out: Any,
                  x: Any) -> None:
    if not (_is_numeric(out) and _is_numeric(x) and _is_numeric(d)):
        return  # (pytrees, containers, other array types, values boxed by an outer derivative)
    what = "tangent" if forward else "cotangent"
    if result is None or type(result) is _Marker:
        return
    if not _is_numeric(result):
        if isinstance(result, (str, bytes)) or not hasattr(result, "shape"):
            raise TypeError(f"the {kind} rule for argument {i} of {_name(fn)} returned "
                            f"{type(result).__name__} {_short(result)}, not a {what}")
        return
    lead = np.ndim(d) - np.ndim(x if forward else out)
    if lead < 0:
        return
    batch = np.shape(d)[:lead]
    expected = batch + np.shape(out if forward else x)
    shape = np.shape(result)
    try:
        joint = np.broadcast_shapes(shape, expected)
    except ValueError:
        joint = None
    if joint is None or (forward and joint != expected):
        target = f"the output's shape {np.shape(out)}" if forward else \
            f"argument {i}'s shape {np.shape(x)}"
        raise ValueError(f"the {kind} rule for argument {i} of {_name(fn)} returned a {what} of "
                         f"shape {shape}, where {target}"
                         + (f" with the {what}'s batch dimensions {batch}" if batch else "")
                         + f" needs {expected}")


def _shifted(rule: Any) -> Any:
    """A rule for a classmethod's arguments as one for its function's, the class first."""
    if rule is None or rule is ZERO or rule is LINEAR:
        return rule
    if type(rule) is Carried:
        inner = rule.rule

        def carried_rule(carried: Any, d: Any, out: Any, cls: Any, /, *args: Any,
                         **kwargs: Any) -> Any:
            return inner(carried if carried is ALL_CARRIED else carried[1:], d, out, *args,
                         **kwargs)
        return Carried(carried_rule)

    def shifted(d: Any, out: Any, cls: Any, /, *args: Any, **kwargs: Any) -> Any:
        return rule(d, out, *args, **kwargs)
    return shifted


def _register(kind: str, fn: Any, rules: tuple[Any, ...]) -> None:
    target, skip = _target(kind, fn)
    _check(kind, fn, rules)
    if kind == "defvjp" and any(rule is LINEAR for rule in rules):
        raise TypeError(f"defvjp({_name(fn)}): LINEAR is for forward rules; reverse mode needs "
                        f"the transpose written out")
    forward = kind == "defjvp"
    user = bool(_SHIPPED)  # (the shipped rules are registered before mark_shipped)
    if user:
        if not rules:
            had = jvp_rules(target) if forward else vjp_rules(target)
            if not had:
                raise TypeError(
                    f"{kind}({_name(fn)}) with no rule: give one rule (or ZERO, or None) per "
                    f"positional argument, or declare it with overdub_ad.nondifferentiable "
                    f"if its derivative is zero")
        _check_arity(kind, fn, target, skip, rules)
        rules = tuple(_checked(kind, fn, i, rule) for i, rule in enumerate(rules))
    if skip:
        rules = (ZERO, *map(_shifted, rules))
    with _lock:
        entry = _entry(target)
        if forward:
            entry.jvps = rules
        else:
            entry.vjps = rules
        if user and not entry.jvps and not entry.vjps:
            del _TABLE[id(target)]  # (every rule taken away: the function is entered again)
        _changed()


def defjvp(fn: Any, *rules: Any) -> Any:
    """Register forward-mode rules for ``fn``, one per positional argument; returns ``fn``.

    Example::

        defjvp(math.hypot, lambda dx, out, x, y: x * dx / out,
                           lambda dy, out, x, y: y * dy / out)

    ``fn`` is the function a call runs: for a method, the class's (``Model.energy``, whose
    rules receive the object first); a classmethod as ``Cls.cm``, its rules written for the
    arguments after the class.  A method bound to an object is refused.  ``defjvp(fn)`` with
    no rule takes ``fn``'s forward rules away."""
    _register("defjvp", fn, rules)
    return fn


def defvjp(fn: Any, *rules: Any) -> Any:
    """Register reverse-mode rules for ``fn``, one per positional argument; returns ``fn``.

    Example::

        defvjp(math.hypot, lambda ct, out, x, y: ct * x / out,
                           lambda ct, out, x, y: ct * y / out)

    What ``fn`` may be is as for :func:`defjvp`; ``defvjp(fn)`` with no rule takes ``fn``'s
    reverse rules away."""
    _register("defvjp", fn, rules)
    return fn


def nondifferentiable(*fns: Any) -> None:
    """Declare functions whose derivative is zero wherever it exists (piecewise constant).
    What each may be is as for :func:`defjvp`."""
    for fn in fns:
        if not callable(fn) and type(fn) is not classmethod:
            raise TypeError(f"nondifferentiable: {fn!r} is not callable")
        target, _ = _target("nondifferentiable", fn)
        _NONDIFFERENTIABLE[id(target)] = target
        _changed()


_BOUND = (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)


def method_with_rules(fn: Any, rules_of: Callable[[Any], Any]) -> tuple[Any, Any] | None:
    """``(method, obj)`` for a bound method ``fn`` of ``obj`` with no rules of its own whose
    method has some (``rules_of``: :func:`jvp_rules` or :func:`vjp_rules`), or is declared
    nondifferentiable: ``defvjp(Model.energy, ...)`` for ``model.energy(x)``,
    ``np.ndarray.dot`` for ``a.dot(y)``.  The call is then run as Python runs it,
    ``method(obj, ...)``, and the method's rules apply.  None otherwise."""
    if type(fn) not in _BOUND:
        return _called_with_rules(fn, rules_of)
    if rules_of(fn) is not None:
        return None
    bound = unbind(fn)
    if bound is None or (rules_of(bound[0]) is None and not is_nondifferentiable(bound[0])):
        return None
    return bound


def _called_with_rules(obj: Any, rules_of: Callable[[Any], Any]) -> tuple[Any, Any] | None:
    """``(call, obj)`` for an object ``obj`` called, ``obj(x)``, whose class's ``__call__``
    is a Python function with rules (or declared nondifferentiable), ``obj`` having none of
    its own: Python runs ``call(obj, x)``, so the rules of ``call`` apply, as they do to
    ``obj.__call__(x)``.  None otherwise."""
    call = getattr(type(obj), "__call__", None)
    if type(call) is not types.FunctionType or (rules_of(call) is None and
                                                not is_nondifferentiable(call)) \
            or rules_of(obj) is not None or is_nondifferentiable(obj):
        return None
    return call, obj


def is_nondifferentiable(fn: Any) -> bool:
    return _NONDIFFERENTIABLE.get(id(fn)) is fn


def jvp_rules(fn: Any) -> tuple[Any, ...] | None:
    """The per-argument forward rules of ``fn`` (``()`` if none registered), by identity."""
    entry = _TABLE.get(id(fn))
    return entry.jvps if entry is not None and entry.fn is fn else None


def vjp_rules(fn: Any) -> tuple[Any, ...] | None:
    entry = _TABLE.get(id(fn))
    return entry.vjps if entry is not None and entry.fn is fn else None


def same_rules(alias: Any, fn: Any) -> None:
    """Register ``fn``'s forward and reverse rules for ``alias`` too (``np.ndarray.sum`` for
    ``np.sum``)."""
    jvps, vjps = jvp_rules(fn), vjp_rules(fn)
    if jvps is None or vjps is None:
        raise TypeError(f"same_rules: {_name(fn)} has no forward and reverse rules to share with "
                        f"{_name(alias)}")
    defjvp(alias, *jvps)
    defvjp(alias, *vjps)


_STANDINS: dict[int, tuple[Any, Any]] = {}  # id(fn) -> (fn, its differentiable stand-in)


def defstandin(fn: Any, standin: Any) -> Any:
    """Run ``standin`` (Python code, differentiated through like any other) wherever ``fn``
    is called under a derivative; ``standin=None`` removes it.  Returns ``fn``.

    For a library function whose own code cannot be differentiated through as it stands -- a
    SciPy solver that hands a Python callback to C (``quad``, ``brentq``), a distribution
    method that goes through ``exec``-generated code -- the stand-in restates it with the
    primitives that have rules.  For a method give the function (``rv_continuous.logpdf``):
    the stand-in receives the instance first, as the method would."""
    if not callable(fn) or not (standin is None or callable(standin)):
        raise TypeError(f"defstandin: {fn!r} and {standin!r} must be callable")
    with _lock:
        if standin is None:
            _STANDINS.pop(id(fn), None)
        else:
            _STANDINS[id(fn)] = (fn, standin)
        _changed()
    return fn


def standin(fn: Any, rules: Callable[[Any], Any] | None = None) -> Any:
    """The stand-in to run for the call of ``fn`` (bound to the instance for a method, or for
    an object whose class's ``__call__`` has one: ``np.vectorize(f)(x)``; for a class built
    by a C ``__new__`` with rules, :func:`_constructor`'s), or None.  ``rules``
    (:func:`jvp_rules` or :func:`vjp_rules`): the mode asking, where a rule of its own
    registered for ``fn`` (``defvjp(float.__pow__, ...)``) wins over the shipped stand-in,
    as a user's rule wins everywhere."""
    if not _STANDINS:
        return None
    found = _STANDINS.get(id(fn))
    if found is not None and found[0] is fn:
        return None if _ruled(fn, rules) else found[1]
    if type(fn) is types.BuiltinMethodType or type(fn) is types.MethodWrapperType:
        # a C method bound to its object (np.add.outer, (2.0).__mul__): its class's method
        owner = fn.__self__  # descriptor (np.ufunc.outer, float.__mul__) has the stand-in
        if owner is None or type(owner) is types.ModuleType:
            return None
        target = getattr(type(owner), fn.__name__, None)
    elif type(fn) is types.FunctionType or type(fn) is types.BuiltinFunctionType:
        return None
    elif isinstance(fn, type):
        return _constructor(fn, rules)
    else:
        target = getattr(fn, "__func__", None)
        if target is None:  # an object called: its __call__
            call = getattr(type(fn), "__call__", None)
            found = _STANDINS.get(id(call))
            if found is not None and found[0] is call and not _ruled(call, rules):
                return types.MethodType(found[1], fn)
            if call is not None and type(call) in _custom_types() and not _ruled(fn, rules):
                # a custom_jvp or custom_vjp as the class's __call__: layer(x) runs
                # call(layer, x), which the context sees as a call of the custom function
                return functools.partial(call, fn)
            return None
    if target is not None:
        found = _STANDINS.get(id(target))
        if found is not None and found[0] is target and not _ruled(target, rules):
            return types.MethodType(found[1], fn.__self__)
    return None


_CUSTOM: tuple[type, ...] = ()


def _custom_types() -> tuple[type, ...]:
    """``(custom_jvp, custom_vjp)``: one of them as a class's ``__call__`` is run as a call of
    it (see :func:`standin`).  Read from ``_custom`` on first use (it imports this module)."""
    global _CUSTOM
    if not _CUSTOM:
        from ._custom import custom_jvp, custom_vjp
        _CUSTOM = (custom_jvp, custom_vjp)
    return _CUSTOM


def _constructor(cls: type, rules: Callable[[Any], Any] | None) -> Any:
    """The stand-in for ``cls(...)`` where ``cls`` has no rules of its own (the mode's) and
    is built by a C ``__new__`` that has rules: ``float.__new__`` for ``Meters(x)``, ``class
    Meters(float)``, a cast.  Run natively, the call would build the instance behind the
    context's back (dropping the derivative), and the core, seeing no Python ``__new__``,
    would run ``__new__`` natively even where ``__init__`` is Python.  The stand-in is
    :func:`_construct` with the class first."""
    if _ruled(cls, rules) or type(cls).__call__ is not type.__call__:
        return None
    new = cls.__new__
    if type(new) is not types.BuiltinFunctionType or not (
            _ruled(new, rules) if rules is not None else _ruled(new, jvp_rules) or
            _ruled(new, vjp_rules)):
        return None
    return functools.partial(_construct, cls)


def _construct(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``cls(*args, **kwargs)`` as ``type.__call__`` runs it, run by the context: the
    ``__new__`` differentiated by its rules, then the class's own ``__init__`` (object's,
    which does nothing here, is not called: it would be given the differentiated values)."""
    obj = cls.__new__(cls, *args, **kwargs)
    init = cls.__init__
    if isinstance(obj, cls) and init is not object.__init__:
        init(obj, *args, **kwargs)
    return obj


def _ruled(fn: Any, rules: Callable[[Any], Any] | None) -> bool:
    """Whether ``fn`` has rules of the mode ``rules`` reads (``()``: the other mode's only)."""
    return rules is not None and (bool(rules(fn)) or is_nondifferentiable(fn))


def registered() -> list[Any]:
    """Every callable with a rule or a nondifferentiable declaration."""
    return [e.fn for e in _TABLE.values()] + list(_NONDIFFERENTIABLE.values())


_SHIPPED: list[Any] = []


def mark_shipped() -> None:
    """Record the tables overdub_ad ships (called once its rule modules are imported)."""
    _SHIPPED[:] = registered()
    for fn in _SHIPPED:
        _SHIPPED_RULES[id(fn)] = (fn, jvp_rules(fn), vjp_rules(fn), is_nondifferentiable(fn))
    _changed()


def snapshot() -> Any:
    """The state of the tables, for :func:`restore` (see ``overdub_ad.testing``)."""
    with _lock:
        return ({key: (entry.fn, entry.jvps, entry.vjps) for key, entry in _TABLE.items()},
                dict(_NONDIFFERENTIABLE), dict(_STANDINS))


def restore(state: Any) -> None:
    """Put the tables back as :func:`snapshot` found them; the change is announced."""
    table, nondifferentiable_fns, standins = state
    with _lock:
        _STANDINS.clear()
        _STANDINS.update(standins)
        _TABLE.clear()
        for key, (fn, jvps, vjps) in table.items():
            entry = _TABLE[key] = _Entry(fn)
            entry.jvps, entry.vjps = jvps, vjps
        _NONDIFFERENTIABLE.clear()
        _NONDIFFERENTIABLE.update(nondifferentiable_fns)
    _changed()


def remove(fn: Any) -> bool:
    """Take away ``fn``'s rules, nondifferentiable declaration and stand-in (for
    ``testing.without_rules``); whether it had any.  The change is announced."""
    with _lock:
        found = _TABLE.pop(id(fn), None) is not None
        found = _NONDIFFERENTIABLE.pop(id(fn), None) is not None or found
        found = _STANDINS.pop(id(fn), None) is not None or found
    _changed()
    return found


def shipped() -> list[Any]:
    """The callables of the shipped tables, without the user's registrations (the meta-test's
    subject: every one of them has a checked case)."""
    return list(_SHIPPED)


def missing(fn: Any, argument: int | str, mode: str, context: str) -> MissingRuleError:
    register = "defjvp" if mode == "forward" else "defvjp"
    from ._callbacks import public_caller, public_name  # (reads the stack: on an error only)
    public = public_caller(fn)
    name = public_name(fn) if public is None else public
    where = f"argument {argument}" if public is None else \
        f"argument {argument} of its internal function {_name(fn)}"
    if type(fn) is _LRU_CACHE:
        # the cache is C code: it calls the function natively, unseen, and would hand back a
        # value cached without its derivative; the user's fix is to go around the cache
        short = getattr(fn, "__name__", "f")
        return MissingRuleError(
            f"no {mode}-mode derivative rule for {name} ({where}) under {context}: {short} is "
            f"behind functools.lru_cache (or functools.cache), whose cache calls it natively, "
            f"so its derivative cannot be followed; call {short}.__wrapped__(...) in the "
            f"function you differentiate, remove the cache there, or register a rule with "
            f"overdub_ad.{register}({name}, ...)")
    if isinstance(fn, type) and issubclass(fn, BaseException):
        # an exception holding a differentiated value: raise and except are not followed
        return MissingRuleError(
            f"{name}({where.replace('argument ', 'a differentiated argument ')}) under "
            f"{context}: an exception cannot carry a derivative (raise and except are not "
            f"followed); keep the differentiated value in a variable that the code after "
            f"the except clause reads")
    why = why_no_source(fn)  # Python code run natively: say why, the user may act on it
    return MissingRuleError(
        f"no {mode}-mode derivative rule for {name} ({where}) under "
        f"{context}; register one with overdub_ad.{register}({name}, ...) or declare it with "
        f"overdub_ad.nondifferentiable if its derivative is zero"
        + ("" if why is None else
           f"; {_name(fn)} is Python without source overdub can read: {why}"))


_LRU_CACHE = type(functools.lru_cache(maxsize=None)(lambda: None))  # functools' C wrapper
