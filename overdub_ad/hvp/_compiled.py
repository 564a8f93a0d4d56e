"""Hessian-vector products of straight-line NumPy functions, compiled from their source.

:mod:`._tape` differentiates the tape a reverse context records: every NumPy call of ``f`` is
intercepted and recorded, then visited twice more (tangents forward, cotangent pairs
backward), each visit a round of Python bookkeeping around a few microseconds of NumPy work.
For the commonest shape of an objective -- a body of assignments and a ``return`` of array
expressions -- this module writes that work out once instead, as a person would write the
Hessian-vector product by hand.  From ``f``'s source it generates one function that computes
``f(x)`` with the tangent (direction ``v``) of every intermediate value, then sweeps back with
pairs (cotangent, tangent of the cotangent)::

    def f(x):                          def hvp(x, v):              # generated (simplified)
        r = x[1:] - x[:-1] ** 2            t1 = x[1:]; d1 = v[1:]
        return np.sum(r ** 2)              t2 = x[:-1]; d2 = v[:-1]
                                           t3 = t2 ** 2; d3 = 2 * t2 * d2
                                           t4 = t1 - t3; d4 = d1 - d3
                                           ...
                                           c4 = ...; e4 = ...      # cotangent, its tangent
                                           ...
                                           return out, e0           # e0: H(x) @ v

The subset: one positional parameter; assignments to names and a final ``return``; numbers;
``+ - * / @``, unary ``-``/``+``, ``**`` by an integer literal; indexing by literal integers and
slices; ``.T``; and, through a name bound to the NumPy module, ``exp expm1 log log1p sin cos
tanh sqrt square sum mean dot matmul`` (``sum``/``mean`` with a literal ``axis``).

What the generated code writes out comes from the rules: the arithmetic operators as the shape
of partials declared beside their rules (``_rules.scalar_shape``: linear with its constants,
bilinear, quotient, power), the elementwise functions' first and second derivatives as
declared (``_rules.defelementwise``), the products' cotangents by their rules.  Only shipped
rules are written out (a function with a rule of the user's is outside the subset: the tape
route applies it), and a translation is made again whenever the rules change.

Names resolve as in ``f``: the generated function, compiled by the core's
:func:`overdub.compile_variant` at ``f``'s lines, shares its globals and closure cells.  Before
any work it checks what the translation assumed -- the names used as NumPy are still the NumPy
module and its functions; other outside values are real numbers or real arrays -- and declines
(``_DECLINED``) when a check fails, when the result is not a real scalar, or when the
computation raises.  A declined call goes to the tape route, which runs ``f`` again: the
generated code has no side effects (the subset writes nothing but its own temporaries), so
this is safe, and a user's error is raised from the user's own code there.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from overdub import (NoSourceError, compile_variant, function_source, hidden_prefix,
                     variant_function)

from .. import _rules
from ..reverse._tape import _unbroadcast

DECLINED = object()
# the generated code's names start so, or with a longer prefix no name of the user's function
# starts with (see overdub.hidden_prefix): compiled, they are unspellable @ names
_STEM = "_odh_"


class _Unsupported(Exception):
    """``f`` is outside the subset: the tape route computes its Hessian-vector products."""


# -- helpers the generated code calls ------------------------------------------------------

def _fit(ct: Any, x: Any) -> Any:
    """``ct`` summed to ``x``'s shape (broadcast dimensions), most often as it is."""
    if type(ct) is np.ndarray and type(x) is np.ndarray and ct.shape == x.shape:
        return ct
    return _unbroadcast(ct, x)


def _grow(d: Any, y: Any) -> Any:
    """A tangent broadcast to its value's shape (``x + c`` with ``c`` the larger constant)."""
    shape = np.shape(y)
    return d if np.shape(d) == shape else np.broadcast_to(d, shape)


def _spread(ct: Any, x: Any, axis: int | None) -> Any:
    """The cotangent of ``x`` from that of ``np.sum(x, axis)``."""
    if axis is not None:
        ct = np.expand_dims(ct, axis)
    return np.broadcast_to(ct, np.shape(x))


def _spread_mean(ct: Any, x: Any, axis: int | None) -> Any:
    count = np.size(x) if axis is None else np.shape(x)[axis]
    return _spread(ct / count, x, axis)


def _owned(a: Any) -> Any:
    """A writable copy of a cotangent, to scatter into (it may be a view of another's)."""
    return np.array(a, dtype=np.result_type(a, float))


def _real(value: Any) -> bool:
    """An outside value the translation may treat as a constant: a real number or array."""
    kind = type(value)
    return kind is float or kind is int or (kind is np.ndarray and value.dtype.kind in "biuf") \
        or (isinstance(value, np.generic) and value.dtype.kind in "biuf")


def _scalar(value: Any) -> bool:
    return np.ndim(value) == 0 and np.isrealobj(value)


_HELPERS: dict[str, Any] = {"fit": _fit, "grow": _grow, "spread": _spread,
                            "spread_mean": _spread_mean, "owned": _owned, "real": _real,
                            "scalar": _scalar, "declined": DECLINED, "numpy": np,
                            "zeros_like": np.zeros_like}

# NumPy functions of the subset: the elementwise ones whose derivatives are declared beside
# their rules (see _elementwise), reductions and products


def _elementwise() -> dict[str, tuple[Any, Any, Any]]:
    """NumPy's name -> (function, f', f'') of the elementwise functions declared with
    ``_rules.defelementwise``."""
    found: dict[str, tuple[Any, Any, Any]] = {}
    for entry in _rules.declared_elementwise().values():
        name = getattr(entry[0], "__name__", "")
        if getattr(np, name, None) is entry[0]:
            found[name] = entry
    return found



_REDUCTIONS = frozenset({"sum", "mean"})
_PRODUCTS = frozenset({"dot", "matmul"})
# ast operator -> (its symbol, the function the reference route records for it)
_BINARY: dict[type, tuple[str, Any]] = {
    ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv), ast.MatMult: ("@", operator.matmul)}


def _scaled(text: str, c: float) -> tuple[bool, str]:
    """``text`` times the constant ``c``, as a term ``(negated, text)`` of a sum."""
    return (False, text) if c == 1.0 else (True, text) if c == -1.0 else \
        (False, f"{c!r} * {text}")


def _sum_of(terms: list[tuple[bool, str]]) -> str:
    """The sum of ``(negated, text)`` terms (at least one)."""
    (negated, first), rest = terms[0], terms[1:]
    return ("-" if negated else "") + first + \
        "".join((" - " if n else " + ") + t for n, t in rest)


# -- compiling ---------------------------------------------------------------------------------

class _Value:
    """What the translation knows of a value: the code naming it, and for a value depending
    on ``x`` (active) the variable holding its tangent and its key among the cotangents."""

    __slots__ = ("code", "tangent", "key", "literal")

    def __init__(self, code: str, tangent: str | None = None, key: int = -1,
                 literal: float | int | None = None) -> None:
        self.code = code
        self.tangent = tangent
        self.key = key
        self.literal = literal


_MODULE = _Value("")


def _needed(lines: list[str], result: str, hidden: str) -> list[bool]:
    """Which generated lines to keep: those the result depends on (straight-line code: one
    backward pass), and every value ``f`` itself computes.  The sweep computes every
    cotangent; a Hessian-vector product needs only the tangent of the parameter's and what
    that reads -- the gradient itself is dropped here.  ``hidden``: the generated names'
    prefix."""
    generated_name = re.compile(r"(?<!\w)" + re.escape(hidden) + r"\w+")  # (not inside a name)
    live = set(generated_name.findall(result))
    keep = []
    for line in reversed(lines):
        target, inplace, uses = line.partition("] += ")
        if inplace:  # name[index] += code
            name = target.partition("[")[0]
        else:
            name, assigned, uses = line.partition(" = ")
            if not assigned or not generated_name.fullmatch(name):  # a check: always kept
                name, uses = "", line
        needed = not name or name in live or name.startswith(hidden + "t")
        keep.append(needed)
        if needed:
            if not inplace:
                live.discard(name)
            live.update(generated_name.findall(uses if not inplace else line))
    return keep[::-1]  # marks a name bound to NumPy: only its attributes are values


class _Translation:
    """The generated source, line by line, with the user node each line comes from.

    ``steps`` lists the active operations in order, for the backward sweep; ``cts`` holds,
    per active value's key, its cotangent and tangent-of-cotangent variables (None: zero so
    far) and whether each is an array this code allocated (so may be written in place).
    ``hidden`` starts every name the generated code makes."""

    def __init__(self, fn: types.FunctionType, hidden: str) -> None:
        self.fn = fn
        self.rules_used: dict[str, Any] = {}  # helper name -> a product's reverse rule
        self.hidden = hidden
        self.lines: list[str] = []
        self.origins: list[ast.AST | None] = []  # None: the def
        self.count = 0
        self.names: dict[str, _Value] = {}
        self.guards: dict[str, str] = {}  # outside name -> the check of it
        self.steps: list[tuple[Any, ...]] = []
        self.cts: dict[int, list[Any]] = {}
        self.origin: ast.AST | None = None

    def emit(self, text: str) -> None:
        self.lines.append(text)
        self.origins.append(self.origin)

    def fresh(self, kind: str) -> str:
        self.count += 1
        return f"{self.hidden}{kind}{self.count}"

    def helper(self, name: str) -> str:
        """The generated name of one of the ``_HELPERS`` (or of a rule in ``rules_used``)."""
        return self.hidden + name

    def temp(self, code: str, kind: str = "t") -> str:
        """``code`` in a new variable: ``t`` for a value ``f`` itself computes (such lines are
        all kept, so that ``f``'s errors and warnings happen here too), ``s`` for a slope or
        another value only derivatives need, ``q`` for the backward sweep's."""
        name = self.fresh(kind)
        self.emit(f"{name} = {code}")
        return name

    def active(self, code: str, tangent_code: str) -> _Value:
        """A new active value: ``code`` and its tangent, each in a variable of its own."""
        value = self.temp(code)
        tangent = self.fresh("d")
        self.emit(f"{tangent} = {tangent_code}")
        return _Value(value, tangent, self.count)

    # -- statements ----------------------------------------------------------------------
    def function(self, node: ast.FunctionDef) -> str:
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or \
                len(args.posonlyargs) + len(args.args) != 1:
            raise _Unsupported
        param = (args.posonlyargs + args.args)[0].arg
        self.names[param] = _Value(self.hidden + "x", self.hidden + "v", 0)
        body = node.body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
        last = body[-1] if body else None
        if not isinstance(last, ast.Return) or last.value is None:
            raise _Unsupported
        for stmt in body[:-1]:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                raise _Unsupported
            self.origin = stmt
            value = self.expr(stmt.value)
            if value is _MODULE:
                raise _Unsupported  # another name for NumPy: its calls would read a local
            self.names[stmt.targets[0].id] = value
        self.origin = last
        out = self.expr(last.value)
        if out.tangent is None:
            raise _Unsupported  # a constant: the tape route says what its derivative is
        return self.backward(out)

    # -- expressions -----------------------------------------------------------------------
    def expr(self, node: ast.expr) -> _Value:
        if isinstance(node, ast.Constant) and (type(node.value) is int or
                                               type(node.value) is float):
            return _Value(repr(node.value), literal=node.value)
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.expr(node.operand)
            sign = "-" if isinstance(node.op, ast.USub) else "+"
            if operand.literal is not None:
                value = -operand.literal if sign == "-" else operand.literal
                return _Value(f"({sign}{operand.code})", literal=value)
            if operand.tangent is None:
                return _Value(self.temp(f"{sign}{operand.code}"))
            self.written_out(operator.neg if sign == "-" else operator.pos)
            out = self.active(f"{sign}{operand.code}", f"{sign}{operand.tangent}")
            self.steps.append(("sign", out, operand, sign))
            return out
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Attribute) and node.attr == "T":
            operand = self.expr(node.value)
            if operand is _MODULE:
                raise _Unsupported
            if operand.tangent is None:
                return _Value(self.temp(f"{operand.code}.T"))
            self.written_out(np.transpose)  # (what the reference records for .T)
            out = self.active(f"{operand.code}.T", f"{operand.tangent}.T")
            self.steps.append(("T", out, operand))
            return out
        if isinstance(node, ast.Call):
            return self.call(node)
        raise _Unsupported

    def name(self, name: str) -> _Value:
        if name in self.names:
            return self.names[name]
        code = self.fn.__code__
        if name in code.co_varnames:
            raise _Unsupported  # a local read before it is assigned
        if name in code.co_freevars:
            cell = (self.fn.__closure__ or ())[code.co_freevars.index(name)]
            try:
                bound = cell.cell_contents
            except ValueError:
                raise _Unsupported from None
        elif name in self.fn.__globals__:
            bound = self.fn.__globals__[name]
        else:
            raise _Unsupported  # a builtin, or unbound
        if bound is np:
            self.guards[name] = f"{name} is not {self.helper('numpy')}"
            return _MODULE
        if not _real(bound):
            raise _Unsupported
        self.guards[name] = f"not {self.helper('real')}({name})"
        return _Value(name)

    def written_out(self, fn: Any) -> None:
        """The generated code writes ``fn``'s derivatives out: only while its rules are the
        shipped ones, and no shipped rule is replaced (a second derivative written out restates
        the derivative of a shipped rule's code, which computes with other shipped functions,
        ``*`` inside ``**``'s: the reference route differentiates it with the user's rule)."""
        if _rules.overridden or not _rules.is_shipped(fn):
            raise _Unsupported

    def binary(self, node: ast.BinOp) -> _Value:
        """``a op b``: the code of the shape of ``op``'s partials declared beside its rules
        (``_rules.scalar_shape``; linear with its constants, bilinear, quotient, power), not
        of its symbol; ``@`` through its rules."""
        left, right = self.expr(node.left), self.expr(node.right)
        if left is _MODULE or right is _MODULE:
            raise _Unsupported
        if isinstance(node.op, ast.Pow):
            return self.power(left, right)
        found = _BINARY.get(type(node.op))
        if found is None:
            raise _Unsupported
        symbol, fn = found
        code = f"{left.code} {symbol} {right.code}"
        if left.tangent is None and right.tangent is None:
            return _Value(self.temp(code))
        if fn is operator.matmul:
            return self.product(code, "{} @ {}", left, right, operator.matmul)
        shape = _rules.scalar_shape(fn)  # (None: the user's rule)
        a, b, da, db = left.code, right.code, left.tangent, right.tangent
        value = self.temp(code)
        if type(shape) is tuple and len(shape) == 2:  # linear: constant partials
            terms = ([_scaled(da, shape[0])] if da else []) + \
                ([_scaled(db, shape[1])] if db else [])
            tangent = _sum_of(terms) if len(terms) == 2 else \
                f"{self.helper('grow')}({_sum_of(terms)}, {value})"
        elif shape is _rules.BILINEAR:
            tangent = " + ".join(([f"{da} * {b}"] if da else []) +
                                 ([f"{a} * {db}"] if db else []))
        elif shape is _rules.QUOTIENT:  # (1 / b, -out / b)
            tangent = f"{da} / {b}" if db is None else \
                f"({da or '0.0'} - {value} * {db}) / {b}"
        else:
            raise _Unsupported  # a rule of the user's, or a shape not written here
        name = self.fresh("d")
        self.emit(f"{name} = {tangent}")
        out = _Value(value, name, self.count)
        self.steps.append((shape, out, left, right))
        return out

    def power(self, base: _Value, exponent: _Value) -> _Value:
        """``a ** p`` for an integer literal ``p``, of the declared shape :data:`POWER`."""
        p = exponent.literal
        if exponent.tangent is not None or p is None or p != int(p):
            raise _Unsupported  # an integer literal power: others are left to the tape
        p = int(p)
        code = f"{base.code} ** {exponent.code}"
        if base.tangent is None:
            return _Value(self.temp(code))
        if p == 0 or _rules.scalar_shape(operator.pow) is not _rules.POWER:
            raise _Unsupported
        slope = "1.0" if p == 1 else f"{p}.0 * {base.code}" if p == 2 else \
            f"{p}.0 * {base.code} ** {p - 1}"
        slope_name = self.temp(slope, "s")
        out = self.active(code, f"{slope_name} * {base.tangent}")
        self.steps.append((_rules.POWER, out, base, p, slope_name))
        return out

    def subscript(self, node: ast.Subscript) -> _Value:
        array = self.expr(node.value)
        if array is _MODULE:
            raise _Unsupported
        index = self.index(node.slice)
        code = f"{array.code}[{index}]"
        if array.tangent is None:
            return _Value(self.temp(code))
        self.written_out(operator.getitem)
        out = self.active(code, f"{array.tangent}[{index}]")
        self.steps.append(("[]", out, array, index))
        return out

    def index(self, node: ast.expr) -> str:
        """A literal basic index (integers, slices of them, ``...``): its source."""
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        for part in parts:
            bounds = [part.lower, part.upper, part.step] if isinstance(part, ast.Slice) \
                else [part]
            for bound in bounds:
                if bound is None or (isinstance(bound, ast.Constant) and
                                     (type(bound.value) is int or bound.value is Ellipsis)):
                    continue
                if isinstance(bound, ast.UnaryOp) and isinstance(bound.op, ast.USub) and \
                        isinstance(bound.operand, ast.Constant) and \
                        type(bound.operand.value) is int:
                    continue
                raise _Unsupported
        return ", ".join([ast.unparse(part) for part in parts]) + \
            ("," if isinstance(node, ast.Tuple) and len(parts) == 1 else "")

    def call(self, node: ast.Call) -> _Value:
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)) or \
                self.name(func.value.id) is not _MODULE:
            raise _Unsupported
        attr = func.attr
        target = getattr(np, attr, None)
        if (attr not in _REDUCTIONS and attr not in _PRODUCTS and attr not in _elementwise()) \
                or target is None:
            raise _Unsupported
        module = func.value.id
        self.guards[f"{module}.{attr}"] = f"{module}.{attr} is not {self.helper('numpy')}.{attr}"
        called = f"{module}.{attr}"
        if attr in _REDUCTIONS:
            args, axis = self.reduction_arguments(node)
            operand = self.expr(args)
            if operand is _MODULE:
                raise _Unsupported
            code = f"{called}({operand.code}, axis={axis!r})"
            if operand.tangent is None:
                return _Value(self.temp(code))
            self.written_out(target)
            out = self.active(code, f"{called}({operand.tangent}, axis={axis!r})")
            self.steps.append((attr, out, operand, axis))
            return out
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise _Unsupported
        operands = [self.expr(a) for a in node.args]
        if any(o is _MODULE for o in operands):
            raise _Unsupported
        if attr in _PRODUCTS:
            if len(operands) != 2:
                raise _Unsupported
            left, right = operands
            code = f"{called}({left.code}, {right.code})"
            if left.tangent is None and right.tangent is None:
                return _Value(self.temp(code))
            return self.product(code, called + "({}, {})", left, right, target)
        if len(operands) != 1:
            raise _Unsupported
        (a,) = operands
        code = f"{called}({a.code})"
        if a.tangent is None:
            return _Value(self.temp(code))
        self.written_out(target)
        value = self.temp(code)
        labels = (f"first_{attr}", f"second_{attr}")  # the derivatives declared beside its rules
        _, self.rules_used[labels[0]], self.rules_used[labels[1]] = _elementwise()[attr]
        slope = self.temp(f"{self.helper(labels[0])}({a.code}, {value})", "s")
        tangent = self.fresh("d")
        self.emit(f"{tangent} = {slope} * {a.tangent}")
        out = _Value(value, tangent, self.count)
        self.steps.append((attr, out, a, (slope, self.helper(labels[1]))))
        return out

    def reduction_arguments(self, node: ast.Call) -> tuple[ast.expr, int | None]:
        args = list(node.args)
        keywords = {k.arg: k.value for k in node.keywords}
        if any(isinstance(a, ast.Starred) for a in args) or None in keywords or \
                set(keywords) - {"axis"} or not 1 <= len(args) <= 2 or \
                (len(args) == 2 and "axis" in keywords):
            raise _Unsupported
        axis_node = args[1] if len(args) == 2 else keywords.get("axis")
        if axis_node is None or (isinstance(axis_node, ast.Constant) and
                                 axis_node.value is None):
            return args[0], None
        text = ast.unparse(axis_node)
        try:
            axis = int(text)
        except ValueError:
            raise _Unsupported from None
        return args[0], axis

    def product(self, code: str, form: str, left: _Value, right: _Value, fn: Any) -> _Value:
        self.written_out(fn)  # (its tangent is written out; its cotangents are its rules)
        rules = _rules.vjp_rules(fn)
        if rules is None or len(rules) != 2 or not all(callable(r) for r in rules):
            raise _Unsupported
        a, b, da, db = left.code, right.code, left.tangent, right.tangent
        parts = ([form.format(da, b)] if da else []) + ([form.format(a, db)] if db else [])
        out = self.active(code, " + ".join(parts))
        labels = (f"rule{self.count}a", f"rule{self.count}b")
        names = (self.helper(labels[0]), self.helper(labels[1]))
        self.rules_used[labels[0]], self.rules_used[labels[1]] = rules
        self.steps.append(("@", out, left, right, names))
        return out

    # -- the backward sweep ----------------------------------------------------------------
    def give(self, target: _Value, which: int, code: str | None) -> None:
        """Add ``code`` (None: zero) to the cotangent (``which`` 0) or its tangent (1)."""
        if code is None:
            return
        slot = self.cts.setdefault(target.key, [None, None, False, False])
        if slot[which] is None:
            name = self.fresh("c" if which == 0 else "e")
            self.emit(f"{name} = {code}")
            slot[which], slot[2 + which] = name, False
        else:
            self.emit(f"{slot[which]} = {slot[which]} + {code}")
            slot[2 + which] = True

    def scatter(self, target: _Value, which: int, code: str | None, index: str) -> None:
        """Add ``code`` into ``target[index]``'s part of its cotangent (or its tangent)."""
        if code is None:
            return
        slot = self.cts.setdefault(target.key, [None, None, False, False])
        name = slot[which]
        if name is None:
            name = slot[which] = self.fresh("c" if which == 0 else "e")
            self.emit(f"{name} = {self.helper('zeros_like')}({target.code}, dtype=float)")
        elif not slot[2 + which]:
            self.emit(f"{name} = {self.helper('owned')}({name})")
        slot[2 + which] = True
        self.emit(f"{name}[{index}] += {code}")

    def backward(self, out: _Value) -> str:
        self.emit(f"if not {self.helper('scalar')}({out.code}): return {self.helper('declined')}")
        self.cts[out.key] = ["1.0", None, False, False]
        for step in reversed(self.steps):
            slot = self.cts.pop(step[1].key, None)
            if slot is None or slot[0] is None:
                continue  # nothing of the output depends on this value
            self.pull(step, slot[0], slot[1])
        x_slot = self.cts.get(0)
        if x_slot is None or x_slot[1] is None:
            return f"{self.helper('zeros_like')}({self.hidden}x, dtype=float)"
        return str(x_slot[1])

    def pull(self, step: tuple[Any, ...], c: str, e: str | None) -> None:
        """Emit the contributions of one operation ``y = op(...)`` to its arguments' pairs,
        given ``y``'s cotangent ``c`` and its tangent ``e`` (None: zero)."""
        kind, y = step[0], step[1]
        fit = self.helper("fit")
        if kind == "sign":
            a = step[2]
            if step[3] == "-":
                self.give(a, 0, f"-{c}")
                self.give(a, 1, e and f"-{e}")
            else:
                self.give(a, 0, c)
                self.give(a, 1, e)
        elif kind == "T":
            self.give(step[2], 0, f"{c}.T")
            self.give(step[2], 1, e and f"{e}.T")
        elif kind == "[]":
            self.scatter(step[2], 0, c, step[3])
            self.scatter(step[2], 1, e, step[3])
        elif type(kind) is tuple:  # linear: constant partials
            for operand, partial in zip(step[2:4], kind):
                if operand.tangent:
                    self.give(operand, 0, f"{fit}({_sum_of([_scaled(c, partial)])}, "
                                          f"{operand.code})")
                    self.give(operand, 1, e and f"{fit}({_sum_of([_scaled(e, partial)])}, "
                                                f"{operand.code})")
        elif kind is _rules.BILINEAR:
            a, b = step[2], step[3]
            for this, other in ((a, b), (b, a)):
                if this.tangent:
                    self.give(this, 0, f"{fit}({c} * {other.code}, {this.code})")
                    terms = ([f"{e} * {other.code}"] if e else []) + \
                        ([f"{c} * {other.tangent}"] if other.tangent else [])
                    self.give(this, 1, f"{fit}({' + '.join(terms)}, {this.code})"
                              if terms else None)
        elif kind is _rules.QUOTIENT:
            a, b = step[2], step[3]
            q = self.temp(f"{c} / {b.code}", "q")  # the cotangent of a, before fitting
            dq_terms = ([e] if e else []) + ([f"-{q} * {b.tangent}"] if b.tangent else [])
            dq = self.temp(f"({' + '.join(dq_terms)}) / {b.code}", "q") if dq_terms else None
            if a.tangent:
                self.give(a, 0, f"{fit}({q}, {a.code})")
                self.give(a, 1, dq and f"{fit}({dq}, {a.code})")
            if b.tangent:
                self.give(b, 0, f"{fit}(-{q} * {y.code}, {b.code})")
                terms = ([f"{dq} * {y.code}"] if dq else []) + [f"{q} * {y.tangent}"]
                self.give(b, 1, f"{fit}(-({' + '.join(terms)}), {b.code})")
        elif kind is _rules.POWER:  # an integer power p: (p a^(p-1)), its derivative p(p-1)a^(p-2)
            a, p, slope = step[2], step[3], step[4]
            self.give(a, 0, f"{c} * {slope}")
            curvature = None if p == 1 else f"{p * (p - 1)}.0" if p == 2 else \
                f"{p * (p - 1)}.0 * {a.code} ** {p - 2}"
            terms = ([f"{e} * {slope}"] if e else []) + \
                ([f"{c} * {curvature} * {a.tangent}"] if curvature else [])
            self.give(a, 1, " + ".join(terms) if terms else None)
        elif kind in _REDUCTIONS:
            a, axis = step[2], step[3]
            spread = self.helper("spread" if kind == "sum" else "spread_mean")
            self.give(a, 0, f"{spread}({c}, {a.code}, {axis!r})")
            self.give(a, 1, e and f"{spread}({e}, {a.code}, {axis!r})")
        elif kind == "@":
            a, b, (rule_a, rule_b) = step[2], step[3], step[4]
            for this, rule, k in ((a, rule_a, 0), (b, rule_b, 1)):
                if not this.tangent:
                    continue
                args = [a.code, b.code]
                self.give(this, 0, f"{fit}({rule}({c}, {y.code}, {args[0]}, {args[1]}), "
                                   f"{this.code})")
                other = (b, a)[k]
                terms = [f"{rule}({e}, {y.code}, {args[0]}, {args[1]})"] if e else []
                if other.tangent:  # the rule is linear in the other factor
                    args[1 - k] = other.tangent
                    terms.append(f"{rule}({c}, {y.code}, {args[0]}, {args[1]})")
                self.give(this, 1, f"{fit}({' + '.join(terms)}, {this.code})"
                          if terms else None)
        else:
            self.unary(step[2], y, step[3], c, e)

    def unary(self, a: _Value, y: _Value, aux: tuple[str, str], c: str, e: str | None) -> None:
        """Pairs through an elementwise function: ``slope = f'(a)``; the tangent of ``c *
        slope`` is ``e * slope + c * f''(a) * da`` (f'' the second derivative declared
        beside the function's rules)."""
        slope, second = aux
        self.give(a, 0, f"{c} * {slope}")
        curvature = f"{c} * {second}({a.code}, {y.code}) * {a.tangent}"
        self.give(a, 1, f"{e} * {slope} + {curvature}" if e else curvature)

    # -- the generated function ------------------------------------------------------------
    def finish(self, result: str) -> types.CodeType:
        """The generated function's code, compiled against the user's file with each line at
        the position of the user node it comes from, so that warnings point there."""
        p = self.hidden
        guards = list(self.guards.values())
        head = [f"def {p}target({p}x, {p}v):"]
        if guards:
            head.append(f"    if {' or '.join(guards)}: return {self.helper('declined')}")
        keep = _needed(self.lines, result, p)
        lines = [line for line, k in zip(self.lines, keep) if k]
        origins: list[ast.AST | None] = [None] * len(head)  # the header: at the user's def
        origins.extend(origin for origin, k in zip(self.origins, keep) if k)
        source = "\n".join(head + ["    " + line for line in lines] + [f"    return {result}"])
        return compile_variant(self.fn, source, origins=origins, hidden=p)


# code object -> (the rules' version it was translated at, the generated code and the rules it
# calls by name, or None: outside the subset).  The translation writes out the formulas of the
# shipped rules in force then (_Translation.written_out): any change of the rules (a user's
# registration, isolated_rules ending, force_route) makes it stale, and it is made again.
_COMPILED: weakref.WeakKeyDictionary[types.CodeType, tuple[int, Any]] = \
    weakref.WeakKeyDictionary()
# function -> (its code, the rules' version, the generated function) for the function as it is
_BUILT: weakref.WeakKeyDictionary[Any, tuple[types.CodeType, int, Any]] = \
    weakref.WeakKeyDictionary()


def _compile(fn: types.FunctionType) -> tuple[types.CodeType, dict[str, Any]]:
    node = function_source(fn)  # (NoSourceError: outside the subset)
    if not isinstance(node, ast.FunctionDef):
        raise _Unsupported  # a lambda, an async def
    if node.decorator_list:
        raise _Unsupported  # the function object is the decorator's; its source is not f's
    translation = _Translation(fn, hidden_prefix(node, _STEM))
    result = translation.function(node)
    return translation.finish(result), translation.rules_used


def _generated(fn: Any) -> Callable[[Any, Any], Any] | None:
    """``fn``'s generated Hessian-vector product, or None outside the subset."""
    if type(fn) is not types.FunctionType:
        return None
    code = fn.__code__
    version = _rules.version  # (read first: a change during the translation makes it stale)
    built = _BUILT.get(fn)
    if built is not None and built[0] is code and built[1] == version:
        return built[2]  # type: ignore[no-any-return]
    found = _COMPILED.get(code)
    if found is None or found[0] != version:
        # (compiled outside any lock: two threads compile alike)
        compiled: Any
        try:
            compiled = _compile(fn)
        except (_Unsupported, NoSourceError, RecursionError, SyntaxError, SystemError):
            compiled = None
        found = _COMPILED[code] = (version, compiled)
    target = None
    if found[1] is not None:
        generated, rules = found[1]
        target = variant_function(fn, generated, {**_HELPERS, **rules})
    _BUILT[fn] = (code, version, target)
    return target


_TOTAL = np.add.reduce  # (the sum of all elements, without np.sum's Python layer)


def compiled_hvp(fn: Any, x: np.ndarray, v: np.ndarray) -> Any:
    """``H(x) @ v`` of ``fn`` by its generated code, or ``DECLINED``."""
    target = _generated(fn)
    if target is None:
        return DECLINED
    mark = _rules.missing_mark()
    try:
        result = target(x, v)
    except Exception:
        _rules.forget_missing(mark)  # (not the program's: the tape route runs it again)
        return DECLINED  # the tape route runs fn again and raises from the user's code
    if result is DECLINED or not math.isfinite(_TOTAL(result, None)):
        # an infinity or a nan in it (or a sum that overflows): a singular point, where forward
        # mode on numbers leaves out the terms of exactly zero tangents (sqrt(sum(x * x)) at
        # 0) that the generated code keeps, 0 * inf = nan: the other routes compute it
        return DECLINED
    if result.dtype != x.dtype or result.base is not None:
        result = result.astype(x.dtype)  # a fresh, writable array (not a broadcast view)
    return result
