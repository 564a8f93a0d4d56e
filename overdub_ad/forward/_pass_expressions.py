"""The pass's expressions: each compiled to a value and its tangent, bound to temporaries.

Float arithmetic is written out in place behind a guard on the operands' types (the rule
tables' expressions, as ``_TANGENTS`` writes them); comparisons run natively where both
operands are of types whose comparison runs no Python code; anything else -- and subscripts,
attributes, calls -- goes to a helper of the runtime (:mod:`._dual_helpers`, :mod:`._dual`).
Methods of :class:`._pass._Function`, which compiles a function and its statements.
"""

from __future__ import annotations

import ast
import operator
from typing import TYPE_CHECKING, Any

from .. import _rules
from ._pass_common import (_class, _helper, _LEVEL, _load, _new_site, _store, _tangent_name,
                           _Unsupported, _Val, _zero)

if TYPE_CHECKING:
    from ._pass import _Function


def _operator(fn: Any) -> ast.expr:
    """``operator.<name>``, read from the module bound in builtins (a native attribute read)."""
    return ast.Attribute(_helper("operator"), fn.__name__, ast.Load())


def _pair(t: str, value: ast.expr) -> ast.stmt:
    """``t, @d.t = value``: a helper's (value, tangent)."""
    return ast.Assign([ast.Tuple([_store(t), _store(_tangent_name(t))], ast.Store())], value)


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod,
           ast.FloorDiv: operator.floordiv, ast.MatMult: operator.matmul,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_INPLACE = {operator.add: operator.iadd, operator.sub: operator.isub,
            operator.mul: operator.imul, operator.truediv: operator.itruediv,
            operator.pow: operator.ipow, operator.mod: operator.imod,
            operator.floordiv: operator.ifloordiv, operator.matmul: operator.imatmul}
_EXPANDED = (ast.Add, ast.Sub, ast.Mult, ast.Div)  # expanded in place on floats and ints
_COMPARISONS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
                ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
                ast.In: operator.contains, ast.NotIn: operator.contains}


def atom(self: _Function, value: ast.expr, d: ast.expr | None, out: list[ast.stmt]) -> _Val:
    """Bind ``value`` to a temporary (and ``d`` to its tangent)."""
    t = self.temp()
    out.append(ast.Assign([_store(t)], value))
    if d is None:
        return _Val(_load(t), None)
    out.append(ast.Assign([_store(_tangent_name(t))], d))
    return _Val(_load(t), _load(_tangent_name(t)))


def expr(self: _Function, node: ast.expr, out: list[ast.stmt]) -> _Val:
    if isinstance(node, ast.Constant):
        return _Val(node, None)
    if isinstance(node, ast.Name):
        return self.name(node, out)
    if isinstance(node, ast.BinOp):
        left = self.expr(node.left, out)
        return self.binop(node.op, left, self.expr(node.right, out), out)
    if isinstance(node, ast.UnaryOp):
        return self.unop(node, out)
    if isinstance(node, ast.Call):
        return self.call(node, out)
    if isinstance(node, ast.Subscript):
        return self.subscript(node, out)
    if isinstance(node, ast.Attribute):
        return self.attribute(node, out)
    if isinstance(node, ast.Compare):
        return self.compare(node, out)
    if isinstance(node, ast.BoolOp):
        return self.boolop(node, out)
    if isinstance(node, ast.IfExp):
        return self.ifexp(node, out)
    if isinstance(node, ast.Tuple):
        vals = [self.expr(e, out) for e in self._elements(node)]
        if all(v.d is None for v in vals):
            return self.atom(ast.Tuple([v.p for v in vals], ast.Load()), None, out)
        return self.atom(ast.Tuple([v.p for v in vals], ast.Load()),
                         ast.Tuple([self.tangent(v) for v in vals], ast.Load()), out)
    if isinstance(node, ast.Set):
        vals = [self.expr(e, out) for e in self._elements(node)]
        self.plain(vals, out)
        out.append(_inert([v.p for v in vals]))
        return self.atom(ast.Call(_helper("new"), [ast.Set([v.p for v in vals])], []), None,
                         out)
    if isinstance(node, ast.List):  # created in this run: values with tangents boxed
        vals = [self.expr(e, out) for e in self._elements(node)]
        return self.atom(ast.Call(_helper("new"), [
            ast.List([self.boxed(v) for v in vals], ast.Load())], []), None, out)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _Unsupported("{**mapping} in a dict display")
        keys, values = [], []
        for k, v in zip(node.keys, node.values):
            assert k is not None
            keys.append(self.expr(k, out))
            values.append(self.expr(v, out))
        self.plain(keys, out)
        dynamic = [k.p for k in keys if not _inert_constant(k.p)]
        if dynamic:
            out.append(_inert(dynamic))
        return self.atom(ast.Call(_helper("new"), [
            ast.Dict([k.p for k in keys], [self.boxed(v) for v in values])], []), None, out)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
        return self.comprehension(node, out)
    if isinstance(node, ast.NamedExpr):
        val = self.expr(node.value, out)
        self.assign(ast.Name(node.target.id, ast.Store()), val, out)
        return self.name(ast.Name(node.target.id, ast.Load()), out)
    if isinstance(node, ast.Lambda):
        self.defaults(node.args, out)
        type(self)(node, self.scope).rewrite()
        return self.atom(node, None, out)
    if isinstance(node, ast.JoinedStr):
        parts: list[ast.expr] = []
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                if part.format_spec is not None:
                    raise _Unsupported("a format specification in an f-string")
                part.value = self.expr(part.value, out).p
                out.append(_inert([part.value]))
            parts.append(part)
        return self.atom(ast.JoinedStr(parts), None, out)
    raise _Unsupported(f"a {type(node).__name__} expression")  # generators, await, yield


def _inert_constant(value: ast.expr) -> bool:
    """A constant: of builtin types only (numbers, strings, None, tuples of them), whose hash
    and text run no Python code."""
    return isinstance(value, ast.Constant)


def _inert(values: list[ast.expr]) -> ast.stmt:
    """A check, before values are hashed or formatted, that doing so runs no Python code."""
    return ast.Expr(ast.Call(_helper("inert"), values, []))


def _elements(self: _Function, node: ast.Tuple | ast.List | ast.Set) -> list[ast.expr]:
    if any(isinstance(e, ast.Starred) for e in node.elts):
        raise _Unsupported("a starred element in a display")
    return node.elts


def boxed(self: _Function, val: _Val) -> ast.expr:
    """``val`` as a container created in this run holds it: boxed where it has a tangent (a
    float with a float tangent in place, as the helper would box it)."""
    if val.d is None:
        return val.p
    floats = ast.BoolOp(ast.And(), [
        ast.Compare(ast.Attribute(e, "__class__", ast.Load()), [ast.Is()], [_helper("float")])
        for e in (val.p, val.d)])
    return ast.IfExp(floats,
                     ast.IfExp(val.d, ast.Call(_helper("Dual"), [_load(_LEVEL), val.p, val.d],
                                               []), val.p),
                     ast.Call(_helper("box"), [_load(_LEVEL), val.p, val.d], []))


def plain(self: _Function, vals: list[_Val], out: list[ast.stmt]) -> None:
    """Values going into a list, set or dict must carry no tangent (checked at run time
    where not known statically)."""
    dynamic = [v.d for v in vals if v.d is not None and not isinstance(v.d, ast.Constant)]
    if dynamic:  # (zero floats pass here; anything else the helper decides)
        out.append(ast.If(ast.BoolOp(ast.Or(), [
            test for d in dynamic for test in (
                ast.Compare(ast.Attribute(d, "__class__", ast.Load()), [ast.IsNot()],
                            [_helper("float")]), d)]),
            [ast.Expr(ast.Call(_helper("plain"), dynamic, []))], []))


def name(self: _Function, node: ast.Name, out: list[ast.stmt]) -> _Val:
    name = node.id
    scope = self.scope
    if name in scope.cells or name in scope.outer:
        # a cell: a boxed value where it has a tangent (a dual of this level unboxed here,
        # a tuple by the helper; another level's dual is a value like a number)
        t = self.temp()
        dt = _tangent_name(t)
        cls = ast.Attribute(_load(t), "__class__", ast.Load())
        out.append(ast.Assign([_store(t)], _load(name)))
        out.append(ast.If(
            ast.BoolOp(ast.And(), [
                ast.Compare(cls, [ast.Is()], [_helper("Dual")]),
                ast.Compare(ast.Attribute(_load(t), "L", ast.Load()), [ast.Is()],
                            [_load(_LEVEL)])]),
            [ast.Assign([_store(dt)], ast.Attribute(_load(t), "t", ast.Load())),
             ast.Assign([_store(t)], ast.Attribute(_load(t), "v", ast.Load()))],
            [ast.If(ast.Compare(ast.Attribute(_load(t), "__class__", ast.Load()),
                                [ast.Is()], [_helper("tuple")]),
                    [_pair(t, ast.Call(_helper("unbox"), [_load(_LEVEL), _load(t)], []))],
                    [ast.Assign([_store(dt)], _zero())])]))
        return _Val(_load(t), _load(dt))
    if name in scope.locals:
        if name in scope.walrus:  # read now: a later `:=` in the expression rebinds it
            return self.atom(_load(name), _load(_tangent_name(name)), out)
        return _Val(_load(name), _load(_tangent_name(name)))
    return _Val(_load(name), None)  # a global or a builtin: no tangent


def guard(self: _Function, vals: list[_Val]) -> ast.expr | None:
    """``a.__class__ is float or ... is int`` for each operand not known to be a float."""
    tests: list[ast.expr] = []
    for v in vals:
        if isinstance(v.p, ast.Constant):
            if type(v.p.value) not in (float, int) or type(v.p.value) is bool:
                return ast.Constant(False)
            continue
        # (NumPy's float64 computes as a float, its tangent too)
        tests.append(ast.BoolOp(ast.Or(), [
            ast.Compare(ast.Attribute(v.p, "__class__", ast.Load()), [ast.Is()],
                        [_helper(kind)]) for kind in ("float", "int", "float64")]))
    if not tests:
        return None
    return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)


def binop(self: _Function, op: ast.operator, a: _Val, b: _Val, out: list[ast.stmt],
          inplace: bool = False) -> _Val:
    fn = _BINOPS[type(op)]
    if inplace:
        if fn not in _INPLACE:
            raise _Unsupported("an in-place bitwise operator")
        fn = _INPLACE[fn]
    t = self.temp()
    dt = _tangent_name(t)
    slow = [_pair(t, ast.Call(_helper("binop"), [
        _load(_LEVEL), _operator(fn), a.p, a.d or ast.Constant(None), b.p,
        b.d or ast.Constant(None)], []))]
    fast = self.expanded(op, a, b, t) if isinstance(op, _EXPANDED) or (
        isinstance(op, ast.Pow) and _literal_exponent(b)) else None
    if fast is None:
        out.extend(slow)
    else:
        guard = self.guard([a, b])
        if isinstance(op, ast.Div) and not (isinstance(b.p, ast.Constant) and b.p.value):
            # a zero divisor to the helper, which applies the rules: NumPy's quotient by zero
            # (np.float64(1.0) / 0.0) has the partial inf, whose term of an exactly zero
            # tangent is left out there, and Python's raises there as it raises plainly
            nonzero = ast.Compare(b.p, [ast.NotEq()], [ast.Constant(0.0)])
            guard = nonzero if guard is None else ast.BoolOp(ast.And(), [guard, nonzero])
        if guard is None:
            out.extend(fast)
        else:
            out.append(ast.If(guard, fast, slow))
    return _Val(_load(t), _load(dt))


def _literal_exponent(b: _Val) -> bool:
    """``x ** c`` written out for a literal ``c >= 1``; below 1 the slope at ``x == 0`` is
    infinite (the rule's value, with its own derivative), which the helper applies."""
    return (isinstance(b.p, ast.Constant) and isinstance(b.p.value, (int, float))
            and type(b.p.value) is not bool and b.p.value >= 1)


def expanded(self: _Function, op: ast.operator, a: _Val, b: _Val,
             t: str) -> list[ast.stmt] | None:
    """``t = a op b`` and its tangent, for floats and ints, written out from the shape of the
    operator's partials declared beside its rules (``_rules.scalar_shape``: constants for ``+``
    and ``-``, bilinear ``*``, quotient ``/``, power ``**`` by a literal), terms of statically
    zero tangents left out; None (the helper, which applies the rules) for another shape."""
    shape = _rules.scalar_shape(_BINOPS[type(op)])
    da, db = a.d, b.d
    parts: list[tuple[ast.expr, bool]] = []  # (term, subtracted)
    if type(shape) is tuple:  # linear: d = px da + py db
        for d, p in ((da, shape[0]), (db, shape[1])):
            if d is not None:
                parts.append((d, True) if p == -1.0 else
                             (d if p == 1.0 else ast.BinOp(d, ast.Mult(), ast.Constant(p)),
                              False))
    elif shape is _rules.BILINEAR:  # d = da b + db a
        parts = [(ast.BinOp(d, ast.Mult(), other), False)
                 for d, other in ((da, b.p), (db, a.p)) if d is not None]
    elif shape is _rules.QUOTIENT:  # d = da (1 / b) + db (-t / b)
        if da is not None:
            parts.append((ast.BinOp(da, ast.Mult(), ast.BinOp(ast.Constant(1.0), ast.Div(),
                                                               b.p)), False))
        if db is not None:
            parts.append((ast.BinOp(db, ast.Mult(), ast.BinOp(
                ast.UnaryOp(ast.USub(), _load(t)), ast.Div(), b.p)), False))
    elif shape is _rules.POWER and isinstance(b.p, ast.Constant) and \
            isinstance(b.p.value, (int, float)):
        c = b.p.value  # d(x ** c) = dx (c x ** (c - 1)), the partial for a constant c >= 1
        if da is not None:
            parts.append((ast.BinOp(da, ast.Mult(), ast.BinOp(
                ast.Constant(c), ast.Mult(), ast.BinOp(a.p, ast.Pow(), ast.Constant(c - 1)))),
                False))
    else:
        return None
    tangent: ast.expr
    if not parts:
        tangent = _zero()
    else:
        tangent = ast.UnaryOp(ast.USub(), parts[0][0]) if parts[0][1] else parts[0][0]
        for term, subtracted in parts[1:]:
            tangent = ast.BinOp(tangent, ast.Sub() if subtracted else ast.Add(), term)
    return [ast.Assign([_store(t)], ast.BinOp(a.p, op, b.p)),
            ast.Assign([_store(_tangent_name(t))], tangent)]


def unop(self: _Function, node: ast.UnaryOp, out: list[ast.stmt]) -> _Val:
    a = self.expr(node.operand, out)
    if isinstance(node.op, ast.Not):
        val = self.atom(ast.UnaryOp(ast.Not(), self.truth(a, out)), None, out)
        val.boolean = True
        return val
    t = self.temp()
    dt = _tangent_name(t)
    fn = {ast.USub: operator.neg, ast.UAdd: operator.pos,
          ast.Invert: operator.invert}[type(node.op)]
    slow = [_pair(t, ast.Call(_helper("unop"), [
        _load(_LEVEL), _operator(fn), a.p, a.d or ast.Constant(None)], []))]
    if isinstance(node.op, ast.Invert):
        out.extend(slow)
        return _Val(_load(t), _load(dt))
    fast: list[ast.stmt] = [
        ast.Assign([_store(t)], ast.UnaryOp(node.op, a.p)),
        ast.Assign([_store(dt)], _zero() if a.d is None else ast.UnaryOp(node.op, a.d))]
    guard = self.guard([a])
    if guard is None:
        out.extend(fast)
    else:
        out.append(ast.If(guard, fast, slow))
    return _Val(_load(t), _load(dt))


def compare(self: _Function, node: ast.Compare, out: list[ast.stmt]) -> _Val:
    """Comparisons (chains short-circuit, each operand evaluated once): native where both
    operands are of types whose comparison runs no Python code, else a helper."""
    result = self.temp()
    left = self.expr(node.left, out)
    block = out
    for i, (op, comparator) in enumerate(zip(node.ops, node.comparators)):
        right = self.expr(comparator, block)
        native = ast.Compare(left.p, [op], [right.p])
        if isinstance(op, (ast.Is, ast.IsNot)):
            block.append(ast.Assign([_store(result)], native))
        else:
            fn = _COMPARISONS[type(op)]
            helper: ast.expr = ast.Call(_helper("compare"), [_operator(fn), left.p, right.p]
                              if fn is not operator.contains else
                              [_operator(fn), right.p, left.p], [])
            if isinstance(op, ast.NotIn):
                helper = ast.UnaryOp(ast.Not(), helper)
            guard = self.safe([left, right]) if fn is not operator.contains else None
            if guard is None and fn is not operator.contains:
                block.append(ast.Assign([_store(result)], native))
            elif guard is None:
                block.append(ast.Assign([_store(result)], helper))
            else:
                block.append(ast.If(guard, [ast.Assign([_store(result)], native)],
                                    [ast.Assign([_store(result)], helper)]))
        if i < len(node.ops) - 1:
            inner: list[ast.stmt] = []
            block.append(ast.If(_load(result), inner, []))
            block = inner
        left = right
    return _Val(_load(result), None, boolean=True)


def safe(self: _Function, vals: list[_Val]) -> ast.expr | None:
    """``a.__class__ in @safe and ...`` for the operands not known to be safe."""
    tests: list[ast.expr] = [
        ast.Compare(ast.Attribute(v.p, "__class__", ast.Load()), [ast.In()],
                    [_helper("safe")])
        for v in vals if not (v.boolean or isinstance(v.p, ast.Constant))]
    if not tests:
        return None
    return tests[0] if len(tests) == 1 else ast.BoolOp(ast.And(), tests)


def truth(self: _Function, val: _Val, out: list[ast.stmt]) -> ast.expr:
    """``val.p`` for a truth test, which must not run a user class's ``__bool__``."""
    if not (val.boolean or isinstance(val.p, ast.Constant)):
        out.append(ast.If(ast.Compare(ast.Attribute(val.p, "__class__", ast.Load()),
                                      [ast.NotIn()], [_helper("truthful")]),
                          [ast.Expr(ast.Call(_helper("truth"), [val.p], []))], []))
    return val.p


def boolop(self: _Function, node: ast.BoolOp, out: list[ast.stmt]) -> _Val:
    t = self.temp()
    dt = _tangent_name(t)
    block = out
    for i, value in enumerate(node.values):
        val = self.expr(value, block)
        block.append(ast.Assign([_store(t)], val.p))
        block.append(ast.Assign([_store(dt)], self.tangent(val)))
        if i < len(node.values) - 1:
            inner: list[ast.stmt] = []
            truth = self.truth(val, block)
            test: ast.expr = truth if isinstance(node.op, ast.And) else ast.UnaryOp(
                ast.Not(), truth)
            block.append(ast.If(test, inner, []))
            block = inner
    return _Val(_load(t), _load(dt))


def ifexp(self: _Function, node: ast.IfExp, out: list[ast.stmt]) -> _Val:
    test = self.expr(node.test, out)
    test.p = self.truth(test, out)
    t = self.temp()
    dt = _tangent_name(t)
    branches = []
    for value in (node.body, node.orelse):
        block: list[ast.stmt] = []
        val = self.expr(value, block)
        block.append(ast.Assign([_store(t)], val.p))
        block.append(ast.Assign([_store(dt)], self.tangent(val)))
        branches.append(block)
    out.append(ast.If(test.p, branches[0], branches[1]))
    return _Val(_load(t), _load(dt))


def subscript(self: _Function, node: ast.Subscript, out: list[ast.stmt]) -> _Val:
    obj = self.expr(node.value, out)
    key = self.index(node.slice, out)
    if not isinstance(key, (ast.Name, ast.Constant)):  # a slice: built once, used twice
        key = self.atom(key, None, out).p
    return self.item(obj, key, out)


def item(self: _Function, obj: _Val, key: ast.expr, out: list[ast.stmt]) -> _Val:
    """``obj[key]`` and its tangent (``key`` an atom): natively from a tuple with tracked
    tangents, or from a list or dict without (this run's, which hold values boxed) at a key
    whose hash and comparison run no Python code; anything else through the helper."""
    t = self.temp()
    dt = _tangent_name(t)
    slow: list[ast.stmt] = [ast.Assign([ast.Tuple([_store(t), _store(dt)], ast.Store())],
                                       ast.Call(_helper("getitem"), [
        _load(_LEVEL), obj.p, obj.d or ast.Constant(None), key], []))]
    cls = _class(obj.p)
    container = _and(ast.BoolOp(ast.Or(), [ast.Compare(cls, [ast.Is()], [_helper(kind)])
                                           for kind in ("list", "dict")]),
                     _and_all([_plain_key_test(key), _zero_test(obj.d)]))
    read = [ast.Assign([_store(t)], ast.Subscript(obj.p, key, ast.Load())), *_unboxed(t)]
    otherwise: list[ast.stmt] = [ast.If(container, read, slow)]
    if obj.d is None:
        out.extend(otherwise)
    else:
        fast: list[ast.stmt] = [
            ast.Assign([_store(t)], ast.Subscript(obj.p, key, ast.Load())),
            ast.Assign([_store(dt)], ast.Subscript(obj.d, key, ast.Load()))]
        out.append(ast.If(ast.Compare(ast.Attribute(obj.d, "__class__", ast.Load()),
                                      [ast.Is()], [_helper("tuple")]), fast, otherwise))
    return _Val(_load(t), _load(dt))


def _plain_key_test(key: ast.expr) -> ast.expr | None:
    """``key`` is a str or an int (its hash, comparison and use as an index run no Python
    code); None where it is such a constant."""
    if isinstance(key, ast.Constant):
        if type(key.value) in (str, int):
            return None
        return ast.Constant(False)
    cls = _class(key)
    return ast.BoolOp(ast.Or(), [ast.Compare(cls, [ast.Is()], [_helper(kind)])
                                 for kind in ("str", "int")])


def _and_all(tests: list[ast.expr | None]) -> ast.expr | None:
    present = [t for t in tests if t is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else ast.BoolOp(ast.And(), present)


def index(self: _Function, node: ast.expr, out: list[ast.stmt]) -> ast.expr:
    if isinstance(node, ast.Slice):
        parts = [None if p is None else self.expr(p, out).p
                 for p in (node.lower, node.upper, node.step)]
        return ast.Call(_load("slice"), [ast.Constant(None) if p is None else p
                                         for p in parts], [])
    if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
        return ast.Tuple([self.index(e, out) for e in node.elts], ast.Load())
    key = self.expr(node, out)
    if key.d is not None and not isinstance(key.d, ast.Constant):
        # (a zero float passes here; anything else the helper decides)
        out.append(ast.If(ast.BoolOp(ast.Or(), [
            ast.Compare(ast.Attribute(key.d, "__class__", ast.Load()), [ast.IsNot()],
                        [_helper("float")]), key.d]),
            [ast.Expr(ast.Call(_helper("plain_key"), [key.d], []))], []))
    return key.p


def attribute(self: _Function, node: ast.Attribute, out: list[ast.stmt],
              obj: _Val | None = None) -> _Val:
    """``obj.name`` (``obj``: the object, compiled already): a module's attribute natively;
    an attribute the site has read before from an object of the same class, as the helper
    recorded it (natively, as a named tuple's field, or by the dual of a property's getter;
    see ``_pass_common``); anything else through the helper, which records the site."""
    if obj is None:
        obj = self.expr(node.value, out)
    t = self.temp()
    dt = _tangent_name(t)
    site = _new_site(self.native)
    cls = self.atom(_class(obj.p), None, out).p
    read = ast.Attribute(obj.p, node.attr, ast.Load())
    branches: list[tuple[ast.expr, list[ast.stmt]]] = [
        (ast.Compare(cls, [ast.Is()], [_helper("Module")]),
         [ast.Assign([_store(t)], read), ast.Assign([_store(dt)], _zero())]),
        (_and(ast.Compare(cls, [ast.Is()], [_site(_helper("attr_native"), site)]),
              _zero_test(obj.d)),
         [ast.Assign([_store(t)], read), *_unboxed(t)]),
        (ast.Compare(cls, [ast.Is()], [_site(_helper("attr_field"), site)]),
         [ast.Assign([_store(t)], read)] + ([ast.If(
             ast.Compare(ast.Attribute(obj.d, "__class__", ast.Load()), [ast.Is()],
                         [_helper("tuple")]),
             [ast.Assign([_store(dt)], ast.Subscript(
                 obj.d, _site(_helper("attr_index"), site), ast.Load()))],
             _unbox_call(t))] if obj.d is not None else _unbox_call(t)))]
    if not self.native:  # (a native site would call the getter itself, not its dual)
        branches.append((
            _and(ast.Compare(cls, [ast.Is()], [_site(_helper("attr_getter_class"), site)]),
                 _zero_test(obj.d)),
            [_pair(t, ast.Call(_site(_helper("attr_getter"), site), [
                ast.Tuple([_load(_LEVEL), _zero()], ast.Load()), obj.p], []))]))
    chain: list[ast.stmt] = [_pair(t, ast.Call(_helper("getattr"), [
        _load(_LEVEL), ast.Constant(site), obj.p, obj.d or ast.Constant(None),
        ast.Constant(node.attr)], []))]
    for test, body in reversed(branches):
        chain = [ast.If(test, body, chain)]
    out.extend(chain)
    return _Val(_load(t), _load(dt))


def _site_of(table: str, site: int) -> ast.expr:
    return _site(_helper(table), site)


def _site(table: ast.expr, site: int) -> ast.expr:
    """``table[site]``: what a site of the dual code recorded (see ``_pass_common``)."""
    return ast.Subscript(table, ast.Constant(site), ast.Load())


def _and(test: ast.expr, other: ast.expr | None) -> ast.expr:
    return test if other is None else ast.BoolOp(ast.And(), [test, other])


def _zero_test(d: ast.expr | None) -> ast.expr | None:
    """``d`` is a zero float (None: statically no tangent, nothing to test); a zero of
    another kind goes to the helper, which decides."""
    if d is None:
        return None
    return ast.BoolOp(ast.And(), [
        ast.Compare(ast.Attribute(d, "__class__", ast.Load()), [ast.Is()], [_helper("float")]),
        ast.UnaryOp(ast.Not(), d)])


def _unbox_call(t: str) -> list[ast.stmt]:
    return [_pair(t, ast.Call(_helper("unbox"), [_load(_LEVEL), _load(t)], []))]


def _unboxed(t: str) -> list[ast.stmt]:
    """``t``, read from an object or a container this run may have stored a value in boxed,
    as a value and its tangent: a boxed dual of this level unboxed in place, a value of a kind
    that holds no boxed value with a zero tangent, anything else by the helper."""
    dt = _tangent_name(t)
    return [ast.If(
        ast.BoolOp(ast.And(), [
            ast.Compare(ast.Attribute(_load(t), "__class__", ast.Load()), [ast.Is()],
                        [_helper("Dual")]),
            ast.Compare(ast.Attribute(_load(t), "L", ast.Load()), [ast.Is()],
                        [_load(_LEVEL)])]),
        [ast.Assign([_store(dt)], ast.Attribute(_load(t), "t", ast.Load())),
         ast.Assign([_store(t)], ast.Attribute(_load(t), "v", ast.Load()))],
        [ast.If(ast.Compare(ast.Attribute(_load(t), "__class__", ast.Load()), [ast.In()],
                            [_helper("flat")]),
                [ast.Assign([_store(dt)], _zero())], _unbox_call(t))])]


_FRAME_READERS = ("super", "locals", "vars", "dir", "globals", "eval", "exec", "breakpoint")


def call(self: _Function, node: ast.Call, out: list[ast.stmt]) -> _Val:
    func = node.func
    if isinstance(func, ast.Name) and func.id in _FRAME_READERS:
        raise _Unsupported(f"{func.id}(), which looks at the calling frame")
    if isinstance(func, ast.Attribute) and func.attr == "append" and len(node.args) == 1 \
            and not node.keywords and not isinstance(node.args[0], (ast.Starred,
                                                                    ast.GeneratorExp)):
        return self.append(node, func, out)
    f = self.expr(func, out)
    if any(k.arg is None for k in node.keywords):
        raise _Unsupported("**mapping in a call")
    if len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.GeneratorExp):
        # f(x for ...) as f([x for ...]) where f consumes the generator whole, in order (the
        # same items, computed in the same order): checked before any item is computed
        out.append(ast.Expr(ast.Call(_helper("consuming"), [f.p], [])))
        args: list[_Val] = [self.comprehension(node.args[0], out)]
        values, tangents, starred = self.arguments([], out, args)
    elif len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.List):
        values, tangents = self.displayed_items(f, node.args[0], out)
        starred = False
    else:
        values, tangents, starred = self.arguments(node.args, out)
        args = []
    kwargs = [(k.arg, self.expr(k.value, out)) for k in node.keywords]
    return self.made_call(func, f, values, tangents, starred, kwargs, out)


def displayed_items(self: _Function, f: _Val, display: ast.List, out: list[ast.stmt]
                    ) -> tuple[list[ast.expr], list[ast.expr]]:
    """The argument of ``f([a, b, ...])``: where ``f`` stacks it into an array
    (``np.array``: ``_dual_objects._stacks``), the items in a list with their tangents beside
    it in a tuple, as a tuple display's, which the stacking follows without a list of boxed
    values made and unboxed again; for any other ``f``, the list a display makes."""
    vals = [self.expr(e, out) for e in self._elements(display)]
    arg = self.temp()
    darg = _tangent_name(arg)
    out.append(ast.If(ast.Call(_helper("stacks"), [f.p], []), [
        ast.Assign([_store(arg)], ast.List([v.p for v in vals], ast.Load())),
        ast.Assign([_store(darg)], ast.Tuple([self.tangent(v) for v in vals], ast.Load()))], [
        ast.Assign([_store(arg)], ast.Call(_helper("new"), [
            ast.List([self.boxed(v) for v in vals], ast.Load())], [])),
        ast.Assign([_store(darg)], _zero())]))
    return [_load(arg)], [_load(darg)]


def append(self: _Function, node: ast.Call, func: ast.Attribute, out: list[ast.stmt]) -> _Val:
    """``obj.append(v)``: into a list this run created, directly (``v`` boxed, as the
    helper would box it); anything else as any call of an attribute.  The attribute is
    read, where it is, before ``v`` is computed, as Python reads it."""
    obj = self.expr(func.value, out)
    obj = self.atom(obj.p, obj.d, out) if not isinstance(obj.p, ast.Name) else obj
    direct = self.temp()
    method: list[ast.stmt] = []
    f = self.attribute(func, method, obj)
    test = _and_all([ast.Compare(_class(obj.p), [ast.Is()], [_helper("list")]),
                     _zero_test(obj.d), ast.Call(_helper("fresh"), [obj.p], [])])
    assert test is not None
    out.append(ast.If(test, [ast.Assign([_store(direct)], ast.Constant(True))],
                      [ast.Assign([_store(direct)], ast.Constant(False)), *method]))
    values, tangents, _ = self.arguments(node.args, out)
    arg = _Val(values[0], None if isinstance(tangents[0], ast.Constant) else tangents[0])
    called: list[ast.stmt] = []
    result = self.made_call(func, f, values, tangents, False, [], called)
    assert isinstance(result.p, ast.Name) and isinstance(result.d, ast.Name)
    out.append(ast.If(_load(direct), [
        ast.Expr(ast.Call(_helper("append"), [obj.p, self.boxed(arg)], [])),
        ast.Assign([_store(result.p.id)], ast.Constant(None)),
        ast.Assign([_store(result.d.id)], _zero())], called))
    return result


def made_call(self: _Function, func: ast.expr, f: _Val, values: list[ast.expr],
              tangents: list[ast.expr], starred: bool, kwargs: list[tuple[str | None, _Val]],
              out: list[ast.stmt]) -> _Val:
    """The call of ``f`` (compiled from ``func``) with its arguments compiled already."""
    t = self.temp()
    dt = _tangent_name(t)
    site = _new_site(self.native) if not (kwargs or starred) else None
    result = ast.Tuple([_store(t), _store(dt)], ast.Store())
    slow = ast.Assign([result], ast.Call(_helper("call"), [
        _load(_LEVEL), ast.Constant(site), f.p,
        ast.Tuple(values, ast.Load()), ast.Tuple(tangents, ast.Load()),
        ast.Dict([ast.Constant(k) for k, _ in kwargs], [v.p for _, v in kwargs])
        if kwargs else ast.Constant(None),
        ast.Dict([ast.Constant(k) for k, _ in kwargs],
                 [v.d or ast.Constant(None) for _, v in kwargs])
        if kwargs else ast.Constant(None)], []))
    if site is None:
        out.append(slow)
        return _Val(_load(t), _load(dt))
    # the function this site called last, if it has a dual: called directly
    dargs = [_zero() if isinstance(d, ast.Constant) and d.value is None else d
             for d in tangents]
    cached = ast.Subscript(_helper("sites"), ast.Constant(site), ast.Load())
    direct = ast.Assign([result], ast.Call(
        f.p, [ast.Tuple([_load(_LEVEL), *dargs], ast.Load()), *values], []))
    otherwise: list[ast.stmt] = [slow]
    # what the site recorded of other kinds of callables (see ``_pass_common``): a function
    # defined in the dual code (a dual, called as it is), a named tuple class, a C function
    # of one float with a rule of its own
    if len(values) == 1:
        value = values[0]
        floats = [ast.Compare(ast.Attribute(e, "__class__", ast.Load()), [ast.Is()],
                              [_helper("float")]) for e in (value, dargs[0])]
        otherwise = [ast.If(ast.BoolOp(ast.And(), [
            ast.Compare(f.p, [ast.Is()], [_site_of("unary", site)]), *floats]),
            [ast.Assign([result], ast.Call(_helper("apply_unary"), [
                f.p, _site_of("unary_rule", site), value, dargs[0]], []))], otherwise)]
    otherwise = [ast.If(ast.Compare(f.p, [ast.Is()], [_site_of("tuples", site)]), [
        ast.Assign([_store(t)], ast.Call(_helper("tuple_new"), [
            f.p, ast.Tuple(list(values), ast.Load())], [])),
        ast.Assign([_store(dt)], ast.Tuple(list(dargs), ast.Load()))], otherwise)]
    if not self.native:  # (a native site calls duals directly already)
        otherwise = [ast.If(ast.Compare(f.p, [ast.Is()], [_site_of("duals", site)]), [
            ast.Assign([result], ast.Call(_helper("apply"), [
                f.p, ast.Tuple([_load(_LEVEL), *dargs], ast.Load()), *values], []))],
            otherwise)]
    if isinstance(func, ast.Attribute):
        # obj.method(...): the method's function, called directly with obj
        method = ast.Attribute(f.p, "__func__", ast.Load())
        otherwise = [ast.If(ast.BoolOp(ast.And(), [
            ast.Compare(ast.Attribute(f.p, "__class__", ast.Load()), [ast.Is()],
                        [_helper("Method")]),
            ast.Compare(method, [ast.Is()], [ast.Subscript(_helper("methods"),
                                                           ast.Constant(site), ast.Load())])]),
            [ast.Assign([result], ast.Call(method, [
                ast.Tuple([_load(_LEVEL), _zero(), *dargs], ast.Load()),
                ast.Attribute(f.p, "__self__", ast.Load()), *values], []))],
            otherwise)]
    out.append(ast.If(ast.Compare(f.p, [ast.Is()], [cached]), [direct], otherwise))
    return _Val(_load(t), _load(dt))


def arguments(self: _Function, nodes: list[ast.expr], out: list[ast.stmt],
              compiled: list[_Val] | None = None
              ) -> tuple[list[ast.expr], list[ast.expr], bool]:
    """A call's positional arguments: their values and tangents (None: none), and whether
    one is starred (``*xs``: its items and their tangents, as tuples, spliced in)."""
    values: list[ast.expr] = []
    tangents: list[ast.expr] = []
    starred = False
    for a in compiled or []:
        values.append(a.p)
        tangents.append(a.d or ast.Constant(None))
    for node in nodes:
        if isinstance(node, ast.Starred):
            starred = True
            val = self.expr(node.value, out)
            t = self.temp()
            out.append(_pair(t, ast.Call(_helper("star"), [
                _load(_LEVEL), val.p, val.d or ast.Constant(None)], [])))
            values.append(ast.Starred(_load(t), ast.Load()))
            tangents.append(ast.Starred(_load(_tangent_name(t)), ast.Load()))
        else:
            val = self.expr(node, out)
            values.append(val.p)
            tangents.append(val.d or ast.Constant(None))
    return values, tangents, starred
