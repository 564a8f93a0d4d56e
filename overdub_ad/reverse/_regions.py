"""Arithmetic regions of the reverse scalar compiler (:mod:`._specialise`): one expression
as a graph.

An expression of ``+ - * / **`` and unary ``-``/``+`` becomes vertices (operations, leaves,
constants); the compiler evaluates its leaves in Python's order, then emits, from the graph,
the value computed natively, the partial derivative of the value in each leaf (reverse
accumulation over the expression, the adjoints written as text), or the general path, each
operation through the context.  The adjoints are those of each operation's shape of partials
as declared beside its rules (``_rules.scalar_shape``: linear with its constants, bilinear,
quotient, power), not of its symbol; an operation without one (the user registered a rule of
their own) sends the expression to the general path, which applies the rules.  A call of one
argument is a leaf made where Python makes it, whose derivative in its argument's node is the
callee's declared ``f'`` when the callee is a declared function of one float (see
:meth:`_Graph.call`).  Text helpers for the generated code sit at the end.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any, Protocol

from .. import _rules


class _Unsupported(Exception):
    """The function uses something the compiler does not translate: the core runs it.  The
    message says what (``explain`` shows it as the route's reason to decline)."""


class _Emitter(Protocol):
    """What a graph asks of the compiler that writes the generated function."""

    ctx: str  # the context parameter's name
    hidden: str  # the prefix of the generated names
    second: bool  # records for hvp's tapes (second partials)
    indent: int
    known: dict[str, tuple[str, str, str]]  # locals unwrapped: name -> (value, node, flag)
    unboxed: set[str]  # locals that need no box (see _unboxed)
    boxless: set[int]  # the ids of the expressions assigned to them

    def emit(self, text: str, origin: ast.AST) -> None: ...
    def fresh(self, kind: str = "t") -> str: ...
    def helper(self, name: str) -> str: ...
    def expr(self, node: ast.expr, origin: ast.AST) -> str: ...
    def hold(self, text: str, origin: ast.AST) -> str: ...
    def unwrap(self, raw: str, origin: ast.AST, names: tuple[str, str] | None = None
               ) -> tuple[str, str, str]: ...
    def unwrap_into(self, raw: str, names: tuple[str, str, str], origin: ast.AST) -> None: ...


class _Vertex:
    """A node of an arithmetic expression: an operation, a leaf, or a constant."""

    __slots__ = ("kind", "op", "args", "shape", "value", "node", "text", "adjoint", "flag",
                 "scale", "curve")

    def __init__(self, kind: str, op: Any = None, args: tuple[Any, ...] = ()) -> None:
        self.kind, self.op, self.args = kind, op, args
        self.shape: Any = None  # an operation's declared shape of partials (_rules.scalar_shape)
        self.value = ""   # the text of its value in the fast block
        self.node = ""    # a leaf's tape node variable
        self.text = ""    # a leaf's raw value (what the general path computes with)
        self.adjoint: list[str] = []
        # a call's (see _Graph.call): its flag, set where it is made, and the derivative and
        # second derivative of its value in its node
        self.flag = self.scale = self.curve = ""


class _Graph:
    """An arithmetic expression as vertices: its leaves evaluated into variables as they are
    built (Python's order), then code for the values, the partials, or the general path.

    ``arith`` and ``unary`` are the compiler's operator tables (ast operator -> symbol,
    function[, in-place function]): the operators a region is made of."""

    def __init__(self, compiler: _Emitter, origin: ast.AST,
                 arith: Mapping[type, tuple[str, Any, Any]],
                 unary: Mapping[type, tuple[str, Any]]) -> None:
        self.c = compiler
        self.origin = origin
        self.arith, self.unary = arith, unary
        self.leaves: list[_Vertex] = []
        self.by_name: dict[str, _Vertex] = {}
        self.ops: list[_Vertex] = []

    def build(self, node: ast.expr) -> _Vertex:
        if isinstance(node, ast.BinOp) and type(node.op) in self.arith:
            left = self.build(node.left)
            right = self.build(node.right)
            vertex = _Vertex("op", type(node.op), (left, right))
            _, fn, in_place = self.arith[type(node.op)]
            shape = _rules.scalar_shape(fn)  # (in place: the same shape, or the user's rule)
            vertex.shape = shape if _rules.scalar_shape(in_place) is shape else None
            self.ops.append(vertex)
            return vertex
        if isinstance(node, ast.UnaryOp) and type(node.op) in self.unary:
            operand = self.build(node.operand)
            vertex = _Vertex("op", type(node.op), (operand,))
            vertex.shape = _rules.scalar_shape(self.unary[type(node.op)][1])
            self.ops.append(vertex)
            return vertex
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and \
                not isinstance(node.value, bool):
            vertex = _Vertex("const")
            vertex.value = vertex.text = repr(node.value)
            self.leaves.append(vertex)
            return vertex
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            # //, %, @, bit operations, not: left to the core
            raise _Unsupported(f"the operator {type(node.op).__name__}")
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and \
                not isinstance(node.args[0], (ast.Starred, ast.Constant)):
            return self.call(node)
        text = self.c.expr(node, self.origin)
        if isinstance(node, ast.Name) and text in self.by_name:
            return self.by_name[text]  # a local read twice is one leaf
        if not _is_name(text):  # a constant of another type (a string, None...)
            text = self.c.hold(text, self.origin)
        vertex = _Vertex("leaf")
        vertex.text = text
        vertex.value = self.c.fresh("v")
        vertex.node = self.c.fresh("n")
        if isinstance(node, ast.Name):
            self.by_name[text] = vertex
        self.leaves.append(vertex)
        return vertex

    def call(self, node: ast.Call) -> _Vertex:
        """``f(a)`` in an expression: made where Python makes it (the callee, then its
        argument, then the call), natively when ``f`` is, at run time, a function of one float
        with declared partials (``_spec_runtime._CALLS``; on hvp's tapes with its declared
        second derivative too) and ``a`` a float: the call is then a leaf of the region whose
        node is ``a``'s and whose derivative in it is ``f'(a)`` (and second derivative
        ``f''(a)``), so that the region's entry takes it, as an operation of its own, with no
        entry for the call.  Any other call -- another callee (a user's function, a user's
        rule for ``math.exp``), an argument that is no float, a point where the declared
        partial hands back None (``np.sqrt`` at 0) -- runs through the context as a leaf
        does, and its value is the leaf (derivative 1).  The argument is computed as any
        expression is (an arithmetic one as a region of its own)."""
        c, origin = self.c, self.origin
        emit = c.emit
        fn = c.hold(c.expr(node.func, origin), origin)
        raw = c.hold(c.expr(node.args[0], origin), origin)
        value, meta, flag = c.unwrap(raw, origin)
        vertex = _Vertex("leaf")
        vertex.value, vertex.node, vertex.flag = c.fresh("v"), c.fresh("n"), c.fresh("ok")
        vertex.scale = c.fresh("d")
        if c.second:
            vertex.curve = c.fresh("h")
        native, found, out = c.fresh("ok"), c.fresh("p"), c.fresh("c")
        general = f"{c.helper('call')}({c.ctx}, {fn}, {raw})"
        emit(f"{native} = False", origin)
        emit(f"if {flag}:", origin)
        table = c.helper("SECOND_CALLS" if c.second else "CALLS")
        emit(f"    {found} = {table}.get({c.helper('id')}({fn}))", origin)
        emit(f"    if {found} is not None:", origin)
        emit(f"        {vertex.value} = {fn}({value})", origin)
        if c.second:
            emit(f"        {vertex.scale} = {found}[0]({value}, {vertex.value})", origin)
            emit(f"        if {vertex.scale} is not None:", origin)
            emit(f"            {native} = True", origin)
            emit(f"            {vertex.curve} = {found}[1]({value}, {vertex.value})", origin)
        else:
            emit(f"        {vertex.scale} = {found}({value}, {vertex.value})", origin)
            emit(f"        {native} = {vertex.scale} is not None", origin)
        emit(f"if {native}:", origin)
        emit(f"    {vertex.node} = {meta}", origin)
        emit(f"    {vertex.flag} = True", origin)
        emit("else:", origin)
        c.indent += 1
        emit(f"{out} = {general}", origin)
        c.unwrap_into(out, (vertex.value, vertex.node, vertex.flag), origin)
        emit(f"{vertex.scale} = 1.0", origin)
        if c.second:
            emit(f"{vertex.curve} = 0.0", origin)
        c.indent -= 1
        # the general path's value: the call's, or made again (a declared function of floats
        # that returned: the same value, no other effect) through the context, where another
        # leaf of the region sends the region there
        vertex.text = f"({out} if not {native} else {general})"
        self.leaves.append(vertex)
        return vertex

    def generic(self, vertex: _Vertex, inplace: bool = False) -> str:
        """The expression with each operation through the context, on the raw leaves."""
        c = self.c
        ctx = c.ctx
        if vertex.kind != "op":
            return vertex.text
        if vertex.op in self.unary:
            op = c.helper("op_" + self.unary[vertex.op][1].__name__)
            return f"{c.helper('un')}({ctx}, {op}, {self.generic(vertex.args[0])})"
        fn: Any = self.arith[vertex.op][2 if inplace else 1]
        return f"{c.helper('bin')}({ctx}, {c.helper('op_' + fn.__name__)}, " \
               f"{self.generic(vertex.args[0])}, {self.generic(vertex.args[1])})"

    def values(self) -> None:
        """Each operation's value, natively (the leaves are numbers here)."""
        for vertex in self.ops:
            vertex.value = self.c.fresh("s")
            if vertex.op in self.unary:
                text = f"{self.unary[vertex.op][0]}{vertex.args[0].value}"
            else:
                a, b = vertex.args
                text = f"{a.value} {self.arith[vertex.op][0]} {b.value}"
            self.c.emit(f"{vertex.value} = {text}", self.origin)

    def partials(self, root: _Vertex, ok: str) -> list[str]:
        """The partial derivative of the root in each leaf, by reverse accumulation over the
        expression (adjoints as text; ``1`` left out of products); on a point the local
        partials do not cover, ``ok`` becomes False."""
        emit, origin = self.c.emit, self.origin
        root.adjoint = ["1"]
        for vertex in reversed(self.ops):
            adjoint = self._total(vertex)
            if adjoint is None:
                continue
            if vertex.op in self.unary:
                # + and - of one operand: linear, their partials +1 and -1, written out while
                # their rules are the shipped ones
                if vertex.shape is None:
                    emit(f"{ok} = False", origin)
                arg = vertex.args[0]
                arg.adjoint.append(adjoint if vertex.op is ast.UAdd else _neg(adjoint))
                continue
            a, b = vertex.args
            shape = vertex.shape
            if type(shape) is tuple and len(shape) == 2:  # linear: constant partials
                a.adjoint.append(_scaled(adjoint, shape[0]))
                b.adjoint.append(_scaled(adjoint, shape[1]))
            elif shape is _rules.BILINEAR:
                a.adjoint.append(_times(adjoint, b.value))
                b.adjoint.append(_times(adjoint, a.value))
            elif shape is _rules.QUOTIENT:  # (1 / b, -out / b)
                divisor = b.value
                if b.kind != "const" or float(b.value) == 0:
                    # a zero divisor goes to the general path (the rules decide); the
                    # partials, computed all the same, divide by 1.0 there: a Python float
                    # zero would raise where NumPy's quotient (np.float64(1.0) / 0.0) did not
                    divisor = self.c.fresh("q")
                    emit(f"if {b.value} == 0:", origin)
                    emit(f"    {ok} = False", origin)
                    emit(f"    {divisor} = 1.0", origin)
                    emit("else:", origin)
                    emit(f"    {divisor} = {b.value}", origin)
                a.adjoint.append(f"{adjoint} / {divisor}" if adjoint != "1"
                                 else f"1.0 / {divisor}")
                b.adjoint.append(_times(_neg(adjoint), f"({vertex.value} / {divisor})"))
            elif shape is _rules.POWER:
                self._power(vertex, adjoint, ok)
            else:  # a rule of the user's (or a shape not written here): the general path
                emit(f"{ok} = False", origin)
        partials = []
        for leaf in self.leaves:
            if leaf.kind != "leaf":
                continue
            total = self._total(leaf)
            if total is None:
                partials.append("0.0")
            else:  # (a call: the derivative of its value in its node, see call)
                partials.append(_times(total, leaf.scale) if leaf.scale else total)
        return partials

    def _total(self, vertex: _Vertex) -> str | None:
        """The adjoint of ``vertex``, summed over its uses, into a variable."""
        parts = vertex.adjoint
        if not parts:
            return None
        text = " + ".join(parts) if len(parts) > 1 else parts[0]
        if text == "1" or _is_name(text):
            return text
        name = self.c.fresh("a")
        self.c.emit(f"{name} = {text}", self.origin)
        return name

    def _power(self, vertex: _Vertex, adjoint: str, ok: str) -> None:
        """The local partials of ``a ** b`` (as ReverseContext's scalar partials: 0 in a for
        b == 0, none at a == 0 for b < 1 nor at an infinite or nan operand; in b
        ``out * log(a)``, 0 at a == 0, none below)."""
        emit, origin, c = self.c.emit, self.origin, self.c
        a, b = vertex.args
        pa = c.fresh("p")
        # (at an infinite or nan operand the rules decide, as power_partials says)
        emit(f"if not (-1e309 < {a.value} < 1e309 and -1e309 < {b.value} < 1e309):", origin)
        emit(f"    {ok} = False", origin)
        if b.kind == "const":
            exponent = float(b.value)
            if exponent == 0:
                emit(f"{pa} = 0.0", origin)
            elif exponent < 1:  # no finite partial at 0 (and 0 ** negative raises)
                emit(f"if {a.value} == 0:", origin)
                emit(f"    {ok} = False", origin)
                emit(f"    {pa} = 0.0", origin)
                emit("else:", origin)
                emit(f"    {pa} = {b.value} * {a.value} ** ({b.value} - 1)", origin)
            else:
                emit(f"{pa} = {b.value} * {a.value} ** ({b.value} - 1)", origin)
            a.adjoint.append(_times(adjoint, pa))
            return
        emit(f"if {b.value} == 0:", origin)
        emit(f"    {pa} = 0.0", origin)
        emit(f"elif {a.value} == 0 and {b.value} < 1:", origin)
        emit(f"    {ok} = False", origin)
        emit(f"    {pa} = 0.0", origin)
        emit("else:", origin)
        emit(f"    {pa} = {b.value} * {a.value} ** ({b.value} - 1)", origin)
        a.adjoint.append(_times(adjoint, pa))
        pb = c.fresh("p")
        depends = [leaf.node for leaf in self._leaves_under(b)]
        emit(f"{pb} = 0.0", origin)
        if depends:
            emit("if " + " or ".join(f"{n} is not None" for n in depends) + ":", origin)
            emit(f"    if {a.value} > 0:", origin)
            emit(f"        {pb} = {vertex.value} * {c.helper('log')}({a.value})", origin)
            emit(f"    elif {a.value} < 0:", origin)
            emit(f"        {ok} = False", origin)
        b.adjoint.append(_times(adjoint, pb))

    def second_partials(self, root: _Vertex, ok: str
                        ) -> tuple[list[str], list[tuple[int, int, str]]]:
        """The partials of the root in the leaves and its second partials, for the tapes of
        ``hvp`` (``ReverseContext.second``): ``(partials, curvature)``, ``curvature`` the
        nonzero entries ``(i, j, h)`` (``i <= j``, positions among the leaves) of the Hessian
        of the root in its leaves.  Forward accumulation over the expression, sparse, each
        entry written into a variable: per operation, its local partials ``(pa, pb)`` and
        second partials ``(haa, hab, hbb)`` by its declared shape (the chain rule of second
        order, ``H = pa Ha + pb Hb + haa ga ga' + hab (ga gb' + gb ga') + hbb gb gb'``).  On
        a point the local derivatives do not cover, or a region too large to expand, ``ok``
        becomes False (the general path records the operations one by one)."""
        emit, origin = self.c.emit, self.origin
        positions = [leaf for leaf in self.leaves if leaf.kind == "leaf"]
        if len(positions) > _MAX_LEAVES:
            emit(f"{ok} = False", origin)
            return ["0.0"] * len(positions), []
        grads: dict[int, dict[int, str]] = {}
        hessians: dict[int, dict[tuple[int, int], str]] = {}
        for k, leaf in enumerate(positions):
            grads[id(leaf)] = {k: leaf.scale or "1"}
            if leaf.curve:  # a call (see call): its value's second derivative in its node
                hessians[id(leaf)] = {(k, k): leaf.curve}
        for vertex in self.ops:
            g: dict[int, str] = {}
            h: dict[tuple[int, int], str] = {}
            if vertex.op in self.unary:
                if vertex.shape is None:
                    emit(f"{ok} = False", origin)
                sign = "1" if vertex.op is ast.UAdd else "-1"
                a = vertex.args[0]
                g = {i: self._held(_product(sign, t)) for i, t in grads.get(id(a), {}).items()}
                h = {ij: self._held(_product(sign, t))
                     for ij, t in hessians.get(id(a), {}).items()}
                grads[id(vertex)], hessians[id(vertex)] = g, h
                continue
            a, b = vertex.args
            ga, gb = grads.get(id(a), {}), grads.get(id(b), {})
            ha, hb = hessians.get(id(a), {}), hessians.get(id(b), {})
            local = self._local_second(vertex, bool(ga), bool(gb), ok)
            if local is None:  # (no shape written here: the general path)
                emit(f"{ok} = False", origin)
                grads[id(vertex)], hessians[id(vertex)] = {}, {}
                continue
            pa, pb, haa, hab, hbb = local
            for i in sorted(set(ga) | set(gb)):
                g[i] = self._held(_sum([_product(pa, ga.get(i)), _product(pb, gb.get(i))]))
            pairs = set(ha) | set(hb)
            indices = sorted(set(ga) | set(gb))
            for n, i in enumerate(indices):
                for j in indices[n:]:
                    pairs.add((i, j))
            for i, j in sorted(pairs):
                terms = [_product(pa, ha.get((i, j))), _product(pb, hb.get((i, j))),
                         _product(haa, ga.get(i), ga.get(j)), _product(hbb, gb.get(i), gb.get(j))]
                if hab is not None:
                    cross = _product(ga.get(i), gb.get(j))
                    other = _product(gb.get(i), ga.get(j))
                    if i == j and cross is not None:
                        terms.append(_product("2.0", hab, cross))
                    else:
                        terms.extend([_product(hab, cross), _product(hab, other)])
                total = _sum(terms)
                if total is not None:
                    h[(i, j)] = self._held(total)
            grads[id(vertex)], hessians[id(vertex)] = g, h
        g_root = grads.get(id(root), {})
        partials = [g_root.get(k, "0.0") for k in range(len(positions))]
        curvature = [(i, j, t) for (i, j), t in sorted(hessians.get(id(root), {}).items())]
        return partials, curvature

    def _held(self, text: str | None) -> str:
        """``text`` (never None here: a sum of nonzero terms) into a variable, unless it is a
        name or a number."""
        assert text is not None
        if _is_name(text):
            return text
        name = self.c.fresh("h")
        self.c.emit(f"{name} = {text}", self.origin)
        return name

    def _local_second(self, vertex: _Vertex, da: bool, db: bool, ok: str
                      ) -> tuple[Any, Any, Any, Any, Any] | None:
        """``(pa, pb, haa, hab, hbb)`` of a binary operation, as texts (None: zero), by its
        declared shape; only what a differentiated operand (``da``, ``db``: one with leaves)
        needs is computed.  None for a shape not written here."""
        emit, origin, c = self.c.emit, self.origin, self.c
        a, b = vertex.args
        shape = vertex.shape
        if type(shape) is tuple and len(shape) == 2:  # linear: constant partials
            return repr(float(shape[0])), repr(float(shape[1])), None, None, None
        if shape is _rules.BILINEAR:  # a * b
            return b.value, a.value, None, "1", None
        if shape is _rules.QUOTIENT or shape is _rules.POWER:
            # the shape's derivatives at run time (see shape_second), where it has them
            local = c.fresh("p")
            depends = [leaf.node for leaf in self._leaves_under(b)]
            moving = " or ".join(f"{n} is not None" for n in depends) if depends else "False"
            which = c.helper("QUOTIENT" if shape is _rules.QUOTIENT else "POWER")
            emit(f"{local} = {which}.second({a.value}, {b.value}, {vertex.value}, {da}, "
                 f"{moving})", origin)
            emit(f"if {local} is None:", origin)
            emit(f"    {ok} = False", origin)
            emit(f"    {local} = (0.0, 0.0, 0.0, 0.0, 0.0)", origin)
            names = [c.fresh("p") for _ in range(5)]
            emit(f"({', '.join(names)}) = {local}", origin)
            pa, pb, haa, hab, hbb = names
            return (pa, (pb if db else None), None if shape is _rules.QUOTIENT else haa,
                    (hab if db else None), (hbb if db else None))  # (a quotient: linear in a)
        return None

    def _leaves_under(self, vertex: _Vertex) -> list[_Vertex]:
        if vertex.kind == "leaf":
            return [vertex]
        if vertex.kind == "const":
            return []
        found: list[_Vertex] = []
        for arg in vertex.args:
            for leaf in self._leaves_under(arg):
                if leaf not in found:
                    found.append(leaf)
        return found


def region(c: _Emitter, node: ast.expr, origin: ast.AST,
           arith: Mapping[type, tuple[str, Any, Any]], unary: Mapping[type, tuple[str, Any]],
           inplace: bool = False) -> str:
    """The code of one arithmetic expression, emitted through compiler ``c`` (its operator
    tables ``arith``, ``unary``): its value, and one tape entry with the partial derivatives in
    its leaves, when they are numbers; else each operation through the context.  Returns the
    name of the result.  ``inplace``: the root is an augmented assignment's operator."""
    graph = _Graph(c, origin, arith, unary)
    root = graph.build(node)
    leaves = graph.leaves
    if not any(leaf.kind == "leaf" for leaf in leaves):
        # constants only: Python's own arithmetic, as the context runs it
        return c.hold(graph.generic(root, inplace), origin)
    result = c.fresh("r")
    ok = c.fresh("ok")
    T = c.helper("T")
    flags = []
    for leaf in leaves:
        if leaf.kind != "leaf":
            continue
        if leaf.flag:  # a call, made where it stands (see _Graph.call)
            flags.append(leaf.flag)
            continue
        leaf.value, leaf.node, flag = c.unwrap(leaf.text, origin,
                                                  (leaf.value, leaf.node))
        flags.append(flag)
    c.emit(f"{ok} = {' and '.join(flags)}", origin)
    c.emit(f"if {ok}:", origin)
    c.indent += 1
    graph.values()
    nodes = [leaf.node for leaf in leaves if leaf.kind == "leaf"]
    entry = c.fresh("n")
    c.emit("if " + " and ".join(f"{n} is None" for n in nodes) + ":", origin)
    c.emit(f"    {result} = {root.value}", origin)
    c.emit(f"    {entry} = None", origin)
    c.emit("else:", origin)
    c.indent += 1
    if c.second:  # hvp's tapes: the second partials too (see _tape._Second)
        partials, curvature = graph.second_partials(root, ok)
        head = c.helper("E2") + ", {entry}, (" + \
            "".join(f"{i}, {j}, {h}, " for i, j, h in curvature) + ")"
    else:
        partials = graph.partials(root, ok)
        head = c.helper("E") + ", {entry}"
    c.emit(f"if {ok} and {c.helper('type')}({root.value}) in {c.helper('R')}:", origin)
    c.emit(f"    {entry} = {c.helper('len')}({c.hidden}tape)  # the entry's position",
              origin)
    pairs = "".join(f", {n}, {p}" for n, p in zip(nodes, partials))
    c.emit(f"    {c.hidden}app(({head.format(entry=entry)}{pairs}))", origin)
    if id(node) in c.boxless:  # (a local that needs no box: see _unboxed)
        c.emit(f"    {result} = {root.value}", origin)
    else:
        c.emit(f"    {result} = {T}({root.value}, {entry}, {c.hidden}ref, "
                  f"{c.hidden}lbl)", origin)
    c.emit("else:", origin)
    c.emit(f"    {ok} = False", origin)
    c.indent -= 2
    c.emit(f"if not {ok}:", origin)
    for leaf in leaves:  # the general path reads the locals: boxed, the ones not yet
        if leaf.kind == "leaf" and leaf.text in c.unboxed and leaf.text in c.known:
            value, entry_of, flag = c.known[leaf.text]
            c.emit(f"    if {flag}:", origin)
            c.emit(f"        {leaf.text} = {value} if {entry_of} is None else "
                      f"{T}({value}, {entry_of}, {c.hidden}ref, {c.hidden}lbl)", origin)
    c.emit(f"    {result} = {graph.generic(root, inplace)}", origin)
    # unwrapped already, for a name it is assigned to (see rebound): its value and node
    # where ok, and where not, the flag sends the next region that reads it to the context
    c.known[result] = (root.value, entry, ok)
    return result


def shape_second(shape: Any, a: Any, b: Any, out: Any, da: bool, db: bool
                 ) -> tuple[Any, ...] | None:
    """``(pa, pb, haa, hab, hbb)`` of a binary operation of the declared ``shape`` on floats
    (the declared shapes' own, ``_rules.defshape``), or None: a point or a shape these
    do not cover."""
    if type(shape) is tuple and len(shape) == 2:
        return shape[0], shape[1], 0.0, 0.0, 0.0
    if shape is _rules.BILINEAR:
        return b, a, 0.0, 1.0, 0.0
    if shape is _rules.QUOTIENT or shape is _rules.POWER:
        local: tuple[Any, ...] | None = shape.second(a, b, out, da, db)
        return local
    return None


# the most leaves a region's second partials are expanded for (their number grows as the
# square): a larger region records its operations one by one on hvp's tapes
_MAX_LEAVES = 24


def _product(*factors: str | None) -> str | None:
    """The product of texts (None: zero, so the product is None), the numbers among them
    multiplied now (``1`` left out, ``-1`` a sign)."""
    number = 1.0
    parts = []
    for factor in factors:
        if factor is None:
            return None
        if _is_number(factor):
            number *= float(factor)
        else:
            parts.append(factor if _is_name(factor) else f"({factor})")
    if not parts:
        return "1" if number == 1.0 else "-1" if number == -1.0 else repr(number)
    text = " * ".join(parts)
    if number == 1.0:
        return text
    if number == -1.0:
        return f"-{text}" if len(parts) == 1 and _is_name(text) else f"-({text})"
    return f"{number!r} * {text}"


def _sum(terms: list[str | None]) -> str | None:
    """The sum of texts (None: zero); None if all are."""
    present = [t for t in terms if t is not None]
    return " + ".join(present) if present else None


def _is_name(text: str) -> bool:
    return text.isidentifier() or _is_number(text)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _neg(text: str) -> str:
    if text == "1":
        return "-1.0"
    return f"-{text}" if _is_name(text) else f"-({text})"


def _scaled(adjoint: str, c: float) -> str:
    """``adjoint`` times the constant partial ``c``."""
    return adjoint if c == 1.0 else _neg(adjoint) if c == -1.0 else _times(adjoint, repr(c))


def _times(adjoint: str, factor: str) -> str:
    if adjoint == "1":
        return factor
    return f"{adjoint} * {factor}"
