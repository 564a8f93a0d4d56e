"""The overdub rewrite: every intercepted call and operator becomes a call of the context.

Before and after, for a context that intercepts calls and binary operators::

    def f(x, y):                      def f(x, y):
        return math.sin(x) * y   ->       return @op(@mul, @od(math.sin, x), y)

``@od`` (calls) and ``@op`` (operators, fixed positional arguments) are the context's dispatchers;
``@mul`` is :func:`operator.mul`.  Names starting with ``@`` cannot be written in Python source, so
they never collide with user names; they are free variables of the rewritten code, filled per
context instance (see ``_cache``).  Every node we synthesise carries the position of the user node
it replaces, so tracebacks and debuggers point at the user's own line and columns.

What stays native: ``and``/``or``/``if``-expressions, truth tests, iteration, literals (passes can
reach those), ``yield``/``await``, frame-sensitive calls (zero-argument ``super()``, ``locals()``,
``sys._getframe()``...), and the *bodies* of nested functions, lambdas and methods: those are
rewritten when they are called, so a function that escapes the context is the user's own function.
"""

from __future__ import annotations

import ast
import builtins
import operator

CALL, BINOP, UNARYOP, COMPARE, SUBSCRIPT, ATTRIBUTE = (
    "call", "binop", "unaryop", "compare", "subscript", "attribute")
ALL_CATEGORIES = frozenset((CALL, BINOP, UNARYOP, COMPARE, SUBSCRIPT, ATTRIBUTE))

BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.MatMult: operator.matmul, ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}
INPLACE_OPS = {
    ast.Add: operator.iadd, ast.Sub: operator.isub, ast.Mult: operator.imul,
    ast.MatMult: operator.imatmul, ast.Div: operator.itruediv, ast.FloorDiv: operator.ifloordiv,
    ast.Mod: operator.imod, ast.Pow: operator.ipow, ast.LShift: operator.ilshift,
    ast.RShift: operator.irshift, ast.BitOr: operator.ior, ast.BitXor: operator.ixor,
    ast.BitAnd: operator.iand,
}
UNARYOPS = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Invert: operator.invert,
            ast.Not: operator.not_}
COMPAREOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
              ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
              ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.In: operator.contains,
              ast.NotIn: operator.contains}
SUBSCRIPT_FNS = (operator.getitem, operator.setitem, operator.delitem)
ATTRIBUTE_FNS = (builtins.getattr, builtins.setattr, builtins.delattr)

# Which category a callable belongs to when a context registers a primitive for it.
CATEGORY_OF = {id(fn): BINOP for fn in (*BINOPS.values(), *INPLACE_OPS.values())}
CATEGORY_OF.update({id(fn): UNARYOP for fn in UNARYOPS.values()})
CATEGORY_OF.update({id(fn): COMPARE for fn in COMPAREOPS.values()})
CATEGORY_OF.update({id(fn): SUBSCRIPT for fn in SUBSCRIPT_FNS})
CATEGORY_OF.update({id(fn): ATTRIBUTE for fn in ATTRIBUTE_FNS})

# Hidden constants the rewritten code may reference, by hidden name.
HIDDEN_CONSTANTS = {"@" + fn.__name__: fn for fn in (
    *BINOPS.values(), *INPLACE_OPS.values(), *UNARYOPS.values(), *COMPAREOPS.values(),
    *SUBSCRIPT_FNS, *ATTRIBUTE_FNS)}
HIDDEN_CONSTANTS["@slice"] = slice
DISPATCHERS = ("@od", "@op", "@op2", "@opr")  # calls; operators by subject; binary; `in`

# Calls that must run in the user's own frame: they inspect the calling frame.
_FRAME_SENSITIVE_NAMES = {"super", "locals", "vars", "dir", "globals", "breakpoint"}
_FRAME_SENSITIVE_ATTRS = {"_getframe", "currentframe", "_getframemodulename"}


def mangle(name: str, class_name: str | None) -> str:
    """Private-name mangling, as the compiler does it for ``self.__x`` inside ``class_name``."""
    if class_name is None or not name.startswith("__") or name.endswith("__") or "." in name:
        return name
    stripped = class_name.lstrip("_")
    return f"_{stripped}{name}" if stripped else name


def _place(node: ast.AST, template: ast.AST) -> ast.AST:
    """Give synthesised ``node`` (and its synthesised children) ``template``'s position."""
    for child in ast.walk(node):
        if "lineno" in child._attributes and not hasattr(child, "lineno"):
            child.lineno = template.lineno
            child.col_offset = template.col_offset
            child.end_lineno = template.end_lineno
            child.end_col_offset = template.end_col_offset
    return node


class Overdubber(ast.NodeTransformer):
    """Rewrites one function's body for a set of intercepted categories.

    Attributes: ``categories`` (what to intercept, fixed); ``class_name`` (for mangling attribute
    names, fixed); ``used`` (hidden names the output references, grows as we go); ``_temps``
    (counter for ``@t`` temporaries); ``_no_walrus`` (depth inside comprehensions and class
    bodies, where the compiler forbids binding our temporaries with ``:=``).
    """

    def __init__(self, categories: frozenset[str], class_name: str | None) -> None:
        self.categories = categories
        self.class_name = class_name
        self.used: set[str] = set()
        self._temps = 0
        self._no_walrus = 0

    # -- helpers ---------------------------------------------------------------------------
    def _name(self, hidden: str, ctx: ast.expr_context | None = None) -> ast.Name:
        if hidden in HIDDEN_CONSTANTS or hidden in DISPATCHERS:
            self.used.add(hidden)
        return ast.Name(id=hidden, ctx=ctx or ast.Load())

    def _temp(self) -> str:
        self._temps += 1
        return f"@t{self._temps}"

    def _dispatch(self, dispatcher: str, fn: object | None, args: list[ast.expr],
                  template: ast.AST, keywords: list[ast.keyword] | None = None) -> ast.Call:
        head = [] if fn is None else [self._name("@" + fn.__name__)]
        call = ast.Call(func=self._name(dispatcher), args=head + args, keywords=keywords or [])
        return _place(call, template)

    def _index(self, node: ast.expr) -> ast.expr:
        """A subscript's index as an ordinary expression (slices become ``slice(...)``)."""
        if isinstance(node, ast.Slice):
            parts = [self.visit(p) if p is not None else ast.Constant(None)
                     for p in (node.lower, node.upper, node.step)]
            return _place(ast.Call(func=self._name("@slice"), args=parts, keywords=[]), node)
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
            return _place(ast.Tuple(elts=[self._index(e) for e in node.elts], ctx=ast.Load()), node)
        return self.visit(node)

    def _attr_name(self, node: ast.Attribute) -> ast.Constant:
        return _place(ast.Constant(mangle(node.attr, self.class_name)), node)

    # -- scopes ----------------------------------------------------------------------------
    def rewrite_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        """Rewrite the body of the function being overdubbed (its header is not executed)."""
        if isinstance(node, ast.Lambda):
            node.body = self.visit(node.body)
        else:
            node.body = self._statements(node.body)

    def _statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new])
        return out

    def _visit_header(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        # Decorators and defaults run in the enclosing scope; the body runs when called and is
        # rewritten then.  Annotations stay native (they may be strings under __future__).
        if not isinstance(node, ast.Lambda):
            node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args.defaults = [self.visit(d) for d in node.args.defaults]
        node.args.kw_defaults = [d if d is None else self.visit(d) for d in node.args.kw_defaults]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self._visit_header(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        outer, self.class_name = self.class_name, node.name
        self._no_walrus += 1
        node.body = self._statements(node.body)
        self._no_walrus -= 1
        self.class_name = outer
        return node

    def _comprehension(self, node: ast.AST) -> ast.AST:
        self._no_walrus += 1
        self.generic_visit(node)
        self._no_walrus -= 1
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    # -- expressions -----------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        frame_sensitive = (
            (isinstance(func, ast.Name) and func.id in _FRAME_SENSITIVE_NAMES)
            or (isinstance(func, ast.Name) and func.id in ("eval", "exec") and len(node.args) < 2
                and not node.keywords)
            or (isinstance(func, ast.Attribute) and func.attr in _FRAME_SENSITIVE_ATTRS))
        if CALL not in self.categories or frame_sensitive:
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            if not frame_sensitive:
                node.func = self.visit(func)
            return node
        func = self.visit(func)
        args = [self.visit(a) for a in node.args]
        keywords = [self.visit(k) for k in node.keywords]
        call = ast.Call(func=self._name("@od"), args=[func, *args], keywords=keywords)
        return _place(call, node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if BINOP not in self.categories:
            return node
        return self._dispatch("@op2", BINOPS[type(node.op)], [node.left, node.right], node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if UNARYOP not in self.categories:
            return node
        return self._dispatch("@op", UNARYOPS[type(node.op)], [node.operand], node)

    def _compare(self, op: ast.cmpop, left: ast.expr, right: ast.expr, node: ast.AST) -> ast.expr:
        if isinstance(op, ast.In):
            return self._dispatch("@opr", operator.contains, [left, right], node)
        if isinstance(op, ast.NotIn):
            inner = self._dispatch("@opr", operator.contains, [left, right], node)
            return _place(ast.UnaryOp(op=ast.Not(), operand=inner), node)
        return self._dispatch("@op2", COMPAREOPS[type(op)], [left, right], node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if COMPARE not in self.categories:
            return node
        if len(node.ops) == 1:
            return self._compare(node.ops[0], node.left, node.comparators[0], node)
        if self._no_walrus:  # a chain needs a temporary, which the compiler forbids here
            return node
        # a < b < c  ->  @op(@lt, a, (@t := b)) and @op(@lt, @t, c): short-circuits, b once.
        parts, left = [], node.left
        for i, (op, right) in enumerate(zip(node.ops, node.comparators)):
            if i < len(node.ops) - 1:
                temp = self._temp()
                bound = _place(ast.NamedExpr(target=ast.Name(temp, ast.Store()), value=right), right)
                parts.append(self._compare(op, left, bound, node))
                left = _place(ast.Name(temp, ast.Load()), right)
            else:
                parts.append(self._compare(op, left, right, node))
        return _place(ast.BoolOp(op=ast.And(), values=parts), node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if SUBSCRIPT not in self.categories or not isinstance(node.ctx, ast.Load):
            self.generic_visit(node)
            return node
        return self._dispatch("@op", operator.getitem,
                              [self.visit(node.value), self._index(node.slice)], node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if ATTRIBUTE not in self.categories or not isinstance(node.ctx, ast.Load):
            self.generic_visit(node)
            return node
        return self._dispatch("@op", getattr, [self.visit(node.value), self._attr_name(node)], node)

    # -- statements that store ------------------------------------------------------------
    def _intercepted_target(self, target: ast.expr) -> bool:
        if isinstance(target, ast.Attribute):
            return ATTRIBUTE in self.categories
        if isinstance(target, ast.Subscript):
            return SUBSCRIPT in self.categories
        if isinstance(target, (ast.Tuple, ast.List)):
            return any(self._intercepted_target(e) for e in target.elts)
        if isinstance(target, ast.Starred):
            return self._intercepted_target(target.value)
        return False

    def _store(self, target: ast.expr, value: ast.expr, template: ast.AST) -> list[ast.stmt]:
        """Statements that assign ``value`` (already rewritten) to ``target`` in Python's order."""
        if isinstance(target, ast.Attribute) and ATTRIBUTE in self.categories:
            call = self._dispatch("@op", setattr,
                                  [self.visit(target.value), self._attr_name(target), value], target)
            return [_place(ast.Expr(call), template)]
        if isinstance(target, ast.Subscript) and SUBSCRIPT in self.categories:
            call = self._dispatch("@op", operator.setitem,
                                  [self.visit(target.value), self._index(target.slice), value],
                                  target)
            return [_place(ast.Expr(call), template)]
        if isinstance(target, (ast.Tuple, ast.List)) and self._intercepted_target(target):
            temps, later = [], []
            for elt in target.elts:
                temp = self._temp()
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                store: ast.expr = ast.Name(temp, ast.Store())
                temps.append(ast.Starred(store, ast.Store()) if isinstance(elt, ast.Starred)
                             else store)
                later += self._store(inner, _place(ast.Name(temp, ast.Load()), elt), template)
            unpack = ast.Assign(targets=[ast.Tuple(temps, ast.Store())], value=value)
            return [_place(unpack, template), *later]
        return [_place(ast.Assign(targets=[self.visit(target)], value=value), template)]

    def _cleanup(self, names: list[str], template: ast.AST) -> ast.stmt:
        return _place(ast.Delete([ast.Name(n, ast.Del()) for n in names]), template)

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list[ast.stmt]:
        if not any(self._intercepted_target(t) for t in node.targets):
            self.generic_visit(node)
            return node
        value = self.visit(node.value)
        if len(node.targets) == 1:
            return self._store(node.targets[0], value, node)
        temp = self._temp()
        out = [_place(ast.Assign([ast.Name(temp, ast.Store())], value), node)]
        for target in node.targets:
            out += self._store(target, _place(ast.Name(temp, ast.Load()), node), node)
        return [*out, self._cleanup([temp], node)]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | list[ast.stmt]:
        if node.value is None or not self._intercepted_target(node.target):
            if node.value is not None:
                node.value = self.visit(node.value)
            if not isinstance(node.target, ast.Name):
                node.target = self.visit(node.target)
            return node
        return self._store(node.target, self.visit(node.value), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST | list[ast.stmt]:
        target = node.target
        if BINOP not in self.categories and not self._intercepted_target(target):
            self.generic_visit(node)
            return node
        value = self.visit(node.value)

        def combine(current: ast.expr) -> ast.expr:
            if BINOP in self.categories:
                return self._dispatch("@op2", INPLACE_OPS[type(node.op)], [current, value], node)
            return _place(ast.BinOp(current, node.op, value), node)  # never reached for names

        if isinstance(target, ast.Name):
            if BINOP not in self.categories:
                node.value = value
                return node
            load = _place(ast.Name(target.id, ast.Load()), target)
            return _place(ast.Assign([ast.Name(target.id, ast.Store())], combine(load)), node)
        # x.a += v / x[i] += v: evaluate x (and i) once, load, combine, store (Python's order).
        obj = self._temp()
        out = [_place(ast.Assign([ast.Name(obj, ast.Store())], self.visit(target.value)), node)]
        temps = [obj]
        obj_load = _place(ast.Name(obj, ast.Load()), target)
        if isinstance(target, ast.Attribute):
            store_target: ast.expr = _place(ast.Attribute(obj_load, target.attr, ast.Store()), target)
            current = self.visit(_place(ast.Attribute(obj_load, target.attr, ast.Load()), target))
        else:
            key = self._temp()
            temps.append(key)
            out.append(_place(ast.Assign([ast.Name(key, ast.Store())], self._index(target.slice)),
                              node))
            key_load = _place(ast.Name(key, ast.Load()), target)
            store_target = _place(ast.Subscript(obj_load, key_load, ast.Store()), target)
            current = self.visit(_place(ast.Subscript(obj_load, key_load, ast.Load()), target))
        result = self._temp()
        temps.append(result)
        out.append(_place(ast.Assign([ast.Name(result, ast.Store())], combine(current)), node))
        out += self._store(store_target, _place(ast.Name(result, ast.Load()), node), node)
        return [*out, self._cleanup(temps, node)]

    def visit_Delete(self, node: ast.Delete) -> ast.AST | list[ast.stmt]:
        if not any(self._intercepted_target(t) for t in node.targets):
            self.generic_visit(node)
            return node
        out: list[ast.stmt] = []

        def delete(target: ast.expr) -> None:
            if isinstance(target, (ast.Tuple, ast.List)):
                for elt in target.elts:
                    delete(elt)
            elif isinstance(target, ast.Attribute) and ATTRIBUTE in self.categories:
                call = self._dispatch("@op", delattr,
                                      [self.visit(target.value), self._attr_name(target)], target)
                out.append(_place(ast.Expr(call), node))
            elif isinstance(target, ast.Subscript) and SUBSCRIPT in self.categories:
                call = self._dispatch("@op", operator.delitem,
                                      [self.visit(target.value), self._index(target.slice)], target)
                out.append(_place(ast.Expr(call), node))
            else:
                out.append(_place(ast.Delete([self.visit(target)]), node))

        for target in node.targets:
            delete(target)
        return out

    def _loop_target(self, node: ast.For | ast.AsyncFor) -> ast.AST:
        if not self._intercepted_target(node.target):
            self.generic_visit(node)
            return node
        # for obj.x in it: ...  ->  for @t in it: obj.x = @t; ...
        temp = self._temp()
        target = node.target
        node.target = _place(ast.Name(temp, ast.Store()), target)
        node.iter = self.visit(node.iter)
        stores = self._store(target, _place(ast.Name(temp, ast.Load()), target), target)
        node.body = stores + self._statements(node.body)
        node.orelse = self._statements(node.orelse)
        return node

    visit_For = visit_AsyncFor = _loop_target
