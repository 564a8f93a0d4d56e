"""Differential fuzzing of overdub_ad: random programs, their derivatives checked every way.

A generator writes real source files of scalar and NumPy code -- branches, loops, lists and
dicts built, mutated and overwritten, arrays written in place (constants, slices, masks, aliased
operands), helper functions, closures, lambdas, methods, properties and setters, `with` blocks,
and nested derivatives whose inner function closes over outer values -- and each program's
derivatives are checked against central finite differences and against each other: grad against
jvp, derivative and jacfwd; jacfwd against jacrev; hessian against jacfwd(jacrev), hvp and
finite differences of the gradient; first and repeated calls.

The generator draws from a `Draw` (a few methods: an integer, a choice): `RandomDraw` for the
long command-line profile, `HypothesisDraw` for the test suite, where failures shrink.

    python -m tests.ad.fuzz --programs 20000 --seed 0          # the long profile
    python -m tests.ad.fuzz --programs 1 --seed 0 --start 1234 --show   # one program, printed

A mismatch prints the program's source and what disagreed; the program is reproducible from
its seed and index.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import tempfile
import textwrap
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

N = 3                                   # the length of every array in a program

# -- drawing ------------------------------------------------------------------------------------


class Draw(Protocol):
    def integer(self, low: int, high: int) -> int: ...      # low <= n <= high


class RandomDraw:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def integer(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high + 1))


class HypothesisDraw:
    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def integer(self, low: int, high: int) -> int:
        return int(self.data.draw(self.st.integers(low, high)))


def pick(draw: Draw, options: list[Any]) -> Any:
    return options[draw.integer(0, len(options) - 1)]


def constant(draw: Draw) -> str:
    return pick(draw, ["0.5", "1.5", "-0.75", "2.0", "0.25", "-1.25", "0.0", "1.0", "3.0"])


# -- programs -----------------------------------------------------------------------------------

PRELUDE = '''\
import functools
import math

import numpy as np

from overdub_ad import derivative, grad


def helper(a, b):
    return a * np.tanh(b) + 0.5 * b


def twice(a):
    return helper(a, a) - a


def substituted(g, args, i, value):
    """Call g with args[i] replaced: how autograd's unary_to_nary builds argument lists."""
    args = list(args)
    args[i] = value
    return g(*args)


class Box:
    def __init__(self, k):
        self._k = k

    @property
    def k(self):
        return self._k

    @k.setter
    def k(self, value):
        self._k = value * 1.0

    @property
    def squared(self):
        return self._k * self._k

    def scale(self, z):
        return self._k * z


class Scaled:
    def __init__(self, k):
        self.k = k

    def __enter__(self):
        return self.k * 2.0

    def __exit__(self, *exc):
        return False


class Wrap:
    def __init__(self, v):
        self.v = v

    def __getattr__(self, name):
        return self.v * 3.0


G = 0.0


def set_g(v):
    """Assign the module global G (read back by the generated function after it)."""
    global G
    G = v
    return v


class Bag:
    def __init__(self, *items):
        self.items = list(items)

    def __iter__(self):
        yield from self.items


'''


@dataclass
class Program:
    """A generated function `f` of one argument (a float, or an array of N floats)."""
    source: str
    array_input: bool
    lines: list[str] = field(default_factory=list)

    def load(self, directory: Path, name: str) -> Callable[..., Any]:
        path = directory / f"{name}.py"
        path.write_text(self.source)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module.f  # type: ignore[no-any-return]


class _Writer:
    """Builds the body of `f`, tracking which names hold scalars and which hold arrays."""

    def __init__(self, draw: Draw, array_input: bool) -> None:
        self.draw = draw
        self.lines: list[str] = []
        self.scalars: list[str] = [] if array_input else ["x"]
        self.arrays: list[str] = ["x"] if array_input else []
        self.fresh_arrays: list[str] = []         # arrays this function owns (may be mutated)
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

    # -- expressions --

    def scalar(self, depth: int = 0) -> str:
        d = self.draw
        if depth >= 2 or d.integer(0, 3) == 0:
            leaves = [*self.scalars] * 3 + [constant(d)]
            if self.arrays:
                leaves += [f"{pick(d, self.arrays)}[{d.integer(0, N - 1)}]"] * 2
            return str(pick(d, leaves))
        a = self.scalar(depth + 1)
        kind = d.integer(0, 15)
        if kind <= 3:
            return f"({a} {pick(d, ['+', '-', '*'])} {self.scalar(depth + 1)})"
        if kind == 4:
            return f"({a} / (1.5 + {self.scalar(depth + 1)} ** 2))"
        if kind == 5:
            return f"{pick(d, ['np.sin', 'np.cos', 'np.tanh', 'math.sin', 'math.tanh'])}({a})"
        if kind == 6:
            return f"math.exp(math.tanh({a}))"
        if kind == 7:
            return f"({a}) ** {pick(d, ['2', '3', '2.0'])}"
        if kind == 8 and self.arrays:
            return f"np.{pick(d, ['sum', 'mean', 'max'])}({self.array(depth + 1)})"
        if kind == 9 and self.arrays:
            return f"({self.array(depth + 1)} @ {self.array(depth + 1)})"
        if kind == 10:
            return f"helper({a}, {self.scalar(depth + 1)})"
        if kind == 11:
            return f"twice({a})"
        if kind == 12:
            return f"sum([{a}, {self.scalar(depth + 1)}])"
        if kind == 13:
            return pick(d, [f"(-{a})", f"Wrap({a}).anything", f"(np.float64(0.25) * {a})",
                            f"functools.partial(helper, {a})({self.scalar(depth + 1)})"])
        if self.arrays:
            return f"np.r_[{self.array(depth + 1)}, {a}][{d.integer(0, N)}]"
        return a

    def array(self, depth: int = 0) -> str:
        d = self.draw
        if not self.arrays or d.integer(0, 5) == 0:
            parts = ", ".join(self.scalar(depth + 1) for _ in range(N))
            return pick(d, [f"np.array([{parts}])", f"({self.scalar(depth + 1)} * np.ones({N}))"])
        if depth >= 2 or d.integer(0, 2) == 0:
            return str(pick(d, self.arrays))
        a = self.array(depth + 1)
        kind = d.integer(0, 8)
        if kind <= 2:
            other = pick(d, [self.array(depth + 1), self.scalar(depth + 1)])
            return f"({a} {pick(d, ['+', '-', '*'])} {other})"
        if kind == 3:
            return f"{pick(d, ['np.sin', 'np.cos', 'np.tanh'])}({a})"
        if kind == 4:
            return f"({a} / (1.0 + {a} ** 2))"
        if kind == 5:
            return f"{a}[::-1]"
        if kind == 6:
            return f"np.cumsum({a})"
        if kind == 7:
            scalars = ", ".join(self.scalar(depth + 1) for _ in range(N))
            return f"({a} + [{scalars}])"
        return f"np.concatenate([{a}[1:], {a}[:1]])"

    # -- statements --

    def statement(self, indent: int = 1, depth: int = 0) -> None:
        d = self.draw
        kind = d.integer(0, 20)
        if kind <= 2 or (kind <= 5 and not self.arrays):
            target = self.name("s")
            self.emit(f"{target} = {self.scalar()}", indent)
            self.scalars.append(target)
        elif kind <= 5:
            target = self.name("a")
            self.emit(f"{target} = {self.array()}", indent)
            self.arrays.append(target)
            self.fresh_arrays.append(target)
        elif kind == 6 and self.fresh_arrays:
            self.mutate_array(indent)
        elif kind == 7 and depth < 2:
            self.branch(indent, depth)
        elif kind == 8 and depth < 2:
            self.loop(indent, depth)
        elif kind == 9:
            self.list_ops(indent)
        elif kind == 10:
            self.dict_ops(indent)
        elif kind == 11:
            self.object_ops(indent)
        elif kind == 12:
            self.closure(indent)
        elif kind == 13 and depth == 0:
            self.nested(indent)
        elif kind == 14:
            target = self.name("s")
            self.emit(f"with Scaled({self.scalar()}) as k:", indent)
            self.emit(f"{target} = k * {self.scalar()}", indent + 1)
            self.scalars.append(target)
        elif kind == 15:
            target = self.name("s")
            func = pick(d, ["sum", "max", "min", "math.fsum"])
            self.emit(f"{target} = {func}(Bag({self.scalar()}, {self.scalar()}))", indent)
            self.scalars.append(target)
        elif kind == 16 and self.scalars:
            target = pick(d, self.scalars)
            if target != "x":
                self.emit(f"{target} {pick(d, ['+=', '-=', '*='])} {self.scalar()}", indent)
        elif kind == 18:
            self.nested_containers(indent)
        elif kind == 19 and depth == 0:
            self.held_argument(indent)
        elif kind == 20 and depth == 0:
            self.global_across_levels(indent)
        elif kind == 17 and self.arrays:
            target = self.name("a")
            source = pick(d, self.arrays)
            self.emit(f"{target} = {source}.copy()", indent)
            self.arrays.append(target)
            self.fresh_arrays.append(target)
            self.mutate_array(indent, target)

    def mutate_array(self, indent: int, target: str | None = None) -> None:
        d = self.draw
        y = target or pick(d, self.fresh_arrays)
        i = d.integer(0, N - 1)
        self.emit(pick(d, [
            f"{y}[{i}] = {constant(d)}",
            f"{y}[{i}] = {self.scalar()}",
            f"{y}[1:] = {constant(d)}",
            f"{y}[1:] = {y}[1:] + {y}[:-1]",
            f"{y}[{y} > 0.5] = 0.0",
            f"{y} *= {y}",
            f"{y} *= {y}[::-1]",
            f"{y} += {self.array()}",
            f"{y}[{i}] *= {constant(d)}",
            f"np.sin({y}, out={y})",
        ]), indent)

    def branch(self, indent: int, depth: int) -> None:
        target = self.name("s")
        self.emit(f"if {self.scalar()} > {constant(self.draw)}:", indent)
        self.emit(f"{target} = {self.scalar()}", indent + 1)
        visible = (list(self.scalars), list(self.arrays), list(self.fresh_arrays))
        self.statement(indent + 1, depth + 1)        # its names exist on this branch only
        self.scalars, self.arrays, self.fresh_arrays = visible
        self.emit("else:", indent)
        self.emit(f"{target} = {self.scalar()}", indent + 1)
        self.scalars.append(target)

    def loop(self, indent: int, depth: int) -> None:
        target = self.name("s")
        self.emit(f"{target} = {self.scalar()}", indent)
        self.emit(f"for i in range({self.draw.integer(1, 3)}):", indent)
        self.emit(f"{target} = 0.5 * {target} + np.tanh({self.scalar()}) * (i + 1)", indent + 1)
        self.scalars.append(target)

    def list_ops(self, indent: int) -> None:
        d = self.draw
        items, target = self.name("L"), self.name("s")
        self.emit(f"{items} = [{self.scalar()}, {self.scalar()}]", indent)
        self.emit(pick(d, [f"{items}.append({self.scalar()})", f"{items}[0] = {self.scalar()}",
                           f"{items} += [{self.scalar()}]", f"{items}[1] = {constant(d)}",
                           f"{items}.insert(0, {self.scalar()})"]), indent)
        self.emit(f"{target} = {pick(d, [f'sum({items})', f'{items}[-1]', f'{items}[0]'])}",
                  indent)
        self.scalars.append(target)

    def nested_containers(self, indent: int) -> None:
        """Lists and tuples held by a list that was filled by appends or item writes, then
        read by NumPy: a trajectory kept as ``hist.append((y, v))`` and ``np.array(hist)``."""
        d = self.draw
        rows, target = self.name("R"), self.name("a")
        self.emit(f"{rows} = {pick(d, ['[]', '[None] * 0'])}", indent)
        for _ in range(N):
            pair = pick(d, [f"[{self.scalar()}, {self.scalar()}]",
                            f"({self.scalar()}, {constant(d)})"])
            self.emit(f"{rows}.append({pair})", indent)
        if d.integer(0, 1):
            self.emit(f"{rows}[{d.integer(0, N - 1)}] = [{self.scalar()}, {self.scalar()}]",
                      indent)
        read = pick(d, ["np.array", "np.asarray", "np.vstack"])
        self.emit(f"{target} = {read}({rows})[:, {d.integer(0, 1)}]", indent)
        self.arrays.append(target)

    def held_argument(self, indent: int) -> None:
        """An inner derivative given a container that another container or an object holds
        (a model's parameters kept on the model)."""
        d = self.draw
        holder, target = self.name("h"), self.name("s")
        inner = f"{{'w': {self.scalar()}, 'v': {self.scalar()}}}"
        store, read = pick(d, [(f"{holder} = Bag(); {holder}.p = {inner}", f"{holder}.p"),
                               (f"{holder} = {{'p': {inner}}}", f"{holder}['p']"),
                               (f"{holder} = [{inner}]", f"{holder}[0]"),
                               (f"{holder} = Bag(); {holder}.p = {inner}", f"dict({holder}.p)")])
        self.emit(store, indent)
        body = pick(d, ["p['w'] ** 2 * p['v']", "math.sin(p['w']) + p['v'] * p['w']"])
        self.emit(f"{target} = sum(grad(lambda p: {body})({read}).values())", indent)
        self.scalars.append(target)

    def global_across_levels(self, indent: int) -> None:
        """A module global assigned inside an inner derivative, or before it, and read by the
        differentiated function after it (perturbation confusion through the heap)."""
        d = self.draw
        target = self.name("s")
        free = self.scalar()
        if d.integer(0, 1):
            self.emit(f"{target} = derivative(lambda z: set_g(z * {free}) + z * z, "
                      f"{self.scalar()}) + G * {self.scalar()}", indent)
        else:
            self.emit(f"set_g({free})", indent)
            self.emit(f"{target} = derivative(lambda z: G * z * z, {self.scalar()}) + G", indent)
        self.scalars.append(target)

    def dict_ops(self, indent: int) -> None:
        table, target = self.name("d"), self.name("s")
        self.emit(f"{table} = {{'a': {self.scalar()}}}", indent)
        self.emit(f"{table}['b'] = {self.scalar()}", indent)
        self.emit(f"{table}['a'] = {table}['a'] * {self.scalar()}", indent)
        self.emit(f"{target} = sum({table}.values())", indent)
        self.scalars.append(target)

    def object_ops(self, indent: int) -> None:
        d = self.draw
        box, target = self.name("b"), self.name("s")
        self.emit(f"{box} = Box({self.scalar()})", indent)
        if d.integer(0, 1):
            self.emit(f"{box}.k = {self.scalar()}", indent)
        read = pick(d, [f"{box}.k", f"{box}.squared", f"{box}.scale({self.scalar()})"])
        self.emit(f"{target} = {read}", indent)
        self.scalars.append(target)

    def closure(self, indent: int) -> None:
        d = self.draw
        func, target = self.name("g"), self.name("s")
        if d.integer(0, 1):
            self.emit(f"def {func}(z):", indent)
            self.emit(f"return z * {self.scalar()} + {self.scalar()}", indent + 1)
        else:
            self.emit(f"{func} = lambda z: z * {self.scalar()} + {self.scalar()}", indent)
        self.emit(f"{target} = {func}({self.scalar()})", indent)
        self.scalars.append(target)

    def nested(self, indent: int) -> None:
        """A derivative inside the differentiated function, closing over its values."""
        d = self.draw
        target = self.name("s")
        free = self.scalar()
        if self.arrays and d.integer(0, 1):
            outer = pick(d, self.arrays)
            self.emit(f"{target} = np.sum(grad(lambda z: np.sum(np.sin(z) * {free}))({outer}))",
                      indent)
        else:
            args = f"({free}, {self.scalar()})"
            body = pick(d, [f"z * z * {free}", f"math.sin(z * {free})", f"helper(z, {free})",
                            f"substituted(helper, {args}, {d.integer(0, 1)}, z)"])
            self.emit(f"{target} = derivative(lambda z: {body}, {self.scalar()})", indent)
        self.scalars.append(target)


def generate(draw: Draw) -> Program:
    array_input = bool(draw.integer(0, 1))
    writer = _Writer(draw, array_input)
    for _ in range(draw.integer(1, 6)):
        writer.statement()
    terms = [*writer.scalars[-3:]] + [f"np.sum({a})" for a in writer.arrays[-2:]]
    result = " + ".join(terms) if terms else "x"
    if array_input and not writer.scalars[-3:] and not writer.arrays[-2:]:
        result = "np.sum(x)"
    writer.emit(f"return {result}")
    body = "\n".join(writer.lines)
    source = PRELUDE + "def f(x):\n" + body + "\n"
    return Program(source, array_input, writer.lines)


# -- checking -----------------------------------------------------------------------------------

class Skip(Exception):
    """The program is not a fair test at this point (non-finite, a kink, an error natively)."""


@dataclass
class Outcome:
    kind: str               # "ok", "skip", "missing-rule", "mismatch", "error"
    detail: str = ""


def _close(a: Any, b: Any, scale: float, rtol: float = 1e-4) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=rtol * scale))


def _fd_grad(f: Callable[..., Any], x: Any, h: float = 1e-6) -> Any:
    """Central differences of f (scalar- or array-valued) at x: shape f(x).shape + x.shape."""
    if isinstance(x, float):
        return (np.asarray(f(x + h)) - np.asarray(f(x - h))) / (2 * h)
    columns = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        columns.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.stack(columns, axis=-1)


def _plain(f: Callable[..., Any], x: Any) -> float:
    """f(x) natively, as a float; Skip when that is not a fair point to differentiate at."""
    value = f(x.copy() if isinstance(x, np.ndarray) else x)
    value = float(value)
    if not math.isfinite(value) or abs(value) > 1e6:
        raise Skip("non-finite or huge value")
    return value


def _smooth_gradient(f: Callable[..., Any], x: Any) -> Any:
    """The finite-difference gradient, or Skip at a kink (two step sizes disagree)."""
    coarse, fine = _fd_grad(f, x, 1e-5), _fd_grad(f, x, 1e-6)
    scale = 1.0 + float(np.max(np.abs(coarse)))
    if not _close(coarse, fine, scale, rtol=1e-3):
        raise Skip("not smooth here")
    return fine


def check(f: Callable[..., Any], x: Any, second_order: bool) -> list[str]:
    """Every derivative API on f at x against finite differences and each other; returns the
    disagreements (empty when all agree)."""
    from overdub_ad import derivative, grad, hessian, hvp, jacfwd, jacrev, jvp, value_and_grad
    from overdub_ad.testing import force_route, REFERENCE

    problems: list[str] = []
    value = _plain(f, x)
    fd = _smooth_gradient(lambda z: _plain(f, z), x)
    scale = 1.0 + float(np.max(np.abs(fd)))

    def agree(name: str, got: Any, want: Any, tol: float = 1e-4) -> None:
        if not _close(got, want, scale, tol):
            problems.append(f"{name}: got {got!r}, want {want!r}")

    arg = (lambda: x.copy()) if isinstance(x, np.ndarray) else (lambda: x)
    for call in ("first", "repeated"):
        agree(f"grad ({call} call)", grad(f)(arg()), fd)
    v, g = value_and_grad(f)(arg())
    agree("value_and_grad value", v, value, 1e-9)
    agree("value_and_grad gradient", g, fd)
    direction = np.linspace(0.5, -0.3, N) if isinstance(x, np.ndarray) else 1.0
    out, tangent = jvp(f, (arg(),), (direction,))
    agree("jvp value", out, value, 1e-9)
    agree("jvp tangent", tangent, np.sum(fd * direction))
    if isinstance(x, np.ndarray):
        agree("jacfwd", jacfwd(f)(arg()), fd)
        agree("jacrev", jacrev(f)(arg()), fd)
    else:
        agree("derivative", derivative(f, arg()), fd)
    if second_order:
        exact = grad(f)
        h_fd = _smooth_gradient(lambda z: np.asarray(exact(z), dtype=float), x) \
            if isinstance(x, np.ndarray) else _smooth_gradient(lambda z: float(exact(z)), x)
        scale = max(scale, 1.0 + float(np.max(np.abs(h_fd))))
        h = hessian(f)(arg())
        agree("hessian vs finite differences of grad", h, h_fd, 1e-3)
        if isinstance(x, np.ndarray):
            agree("jacfwd(jacrev)", jacfwd(jacrev(f))(arg()), h, 1e-6)
            agree("jacrev(jacfwd)", jacrev(jacfwd(f))(arg()), h, 1e-6)
            agree("hvp", hvp(f, arg(), direction), h @ direction, 1e-6)
        else:
            agree("derivative(derivative)", derivative(derivative(f), arg()), h, 1e-6)
            agree("grad(grad)", grad(grad(f))(arg()), h, 1e-6)
            agree("jvp(grad)", jvp(grad(f), (arg(),), (1.0,))[1], h, 1e-6)
        # hvp's fast routes (the tape, compiled code) against its reference, jvp(grad(f)),
        # on a first and a repeated call: the same numbers to rounding
        with force_route(REFERENCE):
            reference = hvp(f, arg(), direction)
        agree("hvp vs finite differences of grad",
              reference, h @ direction if isinstance(x, np.ndarray) else h * direction, 1e-3)
        for call in ("first", "repeated"):
            agree(f"hvp's routes vs its reference ({call} call)", hvp(f, arg(), direction),
                  reference, 1e-9)
        # hessian's route on the tape against its reference, jacfwd(grad(f)), likewise
        with force_route(REFERENCE):
            reference = hessian(f)(arg())
        for call in ("first", "repeated"):
            agree(f"hessian's routes vs its reference ({call} call)", hessian(f)(arg()),
                  reference, 1e-9)
    return problems


def run_program(program: Program, directory: Path, name: str, point_seed: int) -> Outcome:
    from overdub_ad import MissingRuleError

    rng = np.random.default_rng(point_seed)
    try:
        f = program.load(directory, name)
        x: Any = rng.uniform(-1.5, 1.5, N) if program.array_input else \
            float(rng.uniform(-1.5, 1.5))
        try:
            _plain(f, x)
        except Skip as skip:
            return Outcome("skip", str(skip))
        except Exception as error:     # a program that fails natively tests nothing
            return Outcome("skip", f"native {type(error).__name__}: {error}")
        problems = check(f, x, second_order=point_seed % 3 == 0)
    except Skip as skip:
        return Outcome("skip", str(skip))
    except MissingRuleError as missing:
        return Outcome("missing-rule", str(missing).splitlines()[0])
    except Exception:
        return Outcome("error", traceback.format_exc(limit=-4))
    finally:
        sys.modules.pop(name, None)
    if problems:
        return Outcome("mismatch", "\n".join(problems))
    return Outcome("ok")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.ad.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first program")
    parser.add_argument("--show", action="store_true", help="print every program's source")
    parser.add_argument("--max-report", type=int, default=20)
    args = parser.parse_args(argv)
    tally: Counter[str] = Counter()
    reported = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="overdub-fuzz-") as tmp:
        for index in range(args.start, args.start + args.programs):
            program = generate(RandomDraw(args.seed * 1_000_003 + index))
            outcome = run_program(program, Path(tmp), f"fuzz_{args.seed}_{index}", index)
            tally[outcome.kind] += 1
            if args.show or (outcome.kind in ("mismatch", "error") and
                             reported < args.max_report):
                reported += outcome.kind in ("mismatch", "error")
                body = textwrap.indent("\n".join(program.lines), "  ")
                print(f"--- program {index} (seed {args.seed}): {outcome.kind}\n"
                      f"  def f(x):  # x is {'an array' if program.array_input else 'a float'}"
                      f"\n{body}\n{textwrap.indent(outcome.detail, '  >> ')}", flush=True)
    seconds = time.perf_counter() - started
    print(f"{args.programs} programs in {seconds:.0f} s: " +
          ", ".join(f"{kind} {tally[kind]}" for kind in
                    ("ok", "skip", "missing-rule", "mismatch", "error")))
    return 1 if tally["mismatch"] or tally["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
