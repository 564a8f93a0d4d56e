"""Core overhead: overdubbed time / plain time, measured in one process.

Workloads (issue #2):
- a scalar-arithmetic-heavy loop under a context that intercepts nothing it could match
  (a primitive for math.tanh, which the loop never calls): target <= 1.2x;
- the same loop under CountContext (every call and operator intercepted): target <= 8x, and
  <= 1.3x the loop under a context whose prehook does nothing (issue #16: counting itself must
  be cheap);
- a call-heavy workload (fib(18) plus 200 colorsys.rgb_to_hsv calls) under CountContext,
  against cProfile on the same workload: target <= 1.5x cProfile's time;
- the first call of a 50-line function under a new context class (rewriting): target <= 5 ms;
  and the same in a new process, then in a second one that loads the rewrite the first kept
  on disk;
- a new context per call, ``overdub(CountContext(), f, x)`` (Cassette's idiom), against one
  context reused: at most 2 us more per call (issue #16), and the same for a do-nothing
  ``Context`` subclass.

Run: python benchmarks/bench_core.py [--quick]
"""

from __future__ import annotations

# _common first: it sets the thread counts before NumPy starts its pool
from _common import Clock, Figures, at_most

import colorsys
import cProfile
import math
import sys
import time

from overdub import Context, overdub
from overdub.contexts import CountContext


def scalar_loop(n: int) -> float:
    s = 0.0
    x = 0.5
    for i in range(n):
        x = x * 0.999 + 0.001 * (i % 7) - x * x * 0.01
        s += x / (1.0 + x * x)
    return s


def lorenz_rk4(x: float, y: float, z: float, steps: int = 200, h: float = 0.01) -> float:
    """RK4 integration of the Lorenz system in a plain Python loop (the AD benchmarks' workload)."""
    def rhs(x: float, y: float, z: float) -> tuple:
        return 10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z

    for _ in range(steps):
        k1 = rhs(x, y, z)
        k2 = rhs(x + h / 2 * k1[0], y + h / 2 * k1[1], z + h / 2 * k1[2])
        k3 = rhs(x + h / 2 * k2[0], y + h / 2 * k2[1], z + h / 2 * k2[2])
        k4 = rhs(x + h * k3[0], y + h * k3[1], z + h * k3[2])
        x += h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        y += h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        z += h / 6 * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
    return x + y + z


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def call_heavy(fib_n: int = 18) -> float:
    total = float(fib(fib_n))
    for i in range(200):
        h, s, v = colorsys.rgb_to_hsv(i / 200, 0.5, 1 - i / 400)
        total += h + s + v
    return total


class TanhOnly(Context):
    """A context whose only primitive (math.tanh) the workloads never call."""


class EmptyPrehook(Context):
    """A context whose prehook does nothing: what intercepting every call and operator costs
    before the hook does any work."""

    def prehook(self, fn, /, *args, **kwargs):
        pass


class DoNothing(Context):
    """A context that overrides nothing."""


def small(x: float) -> float:
    return x * 2.0 + 1.0


# The figures that are differences of two times: near 0, they may come out below it in a
# quick run on a busy machine (tests/meta/test_benchmarks.py asks them to be finite only).
DIFFERENCES = ("overdub(CountContext(), f, x) per call, minus the same with one context reused",
               "the same for a Context subclass that overrides nothing")


def entry_cost_us(clock: Clock, cls: type, calls: int) -> float:
    """Microseconds a context made for the call adds to ``overdub(ctx, small, 3.0)`` over
    one context reused for every call (each timed over ``calls`` calls, in turns)."""
    reused = cls()

    def fresh_each() -> None:
        for _ in range(calls):
            overdub(cls(), small, 3.0)

    def reusing() -> None:
        for _ in range(calls):
            overdub(reused, small, 3.0)

    fresh, same = clock.interleaved(fresh_each, reusing)
    return (fresh - same) / calls * 1e6


@TanhOnly.primitive(math.tanh)
def _tanh(ctx: Context, x: float) -> float:
    return math.tanh(x)


def fifty_line_function_source(name: str) -> str:
    body = [f"def {name}(a, b):", "    total = 0"]
    for i in range(48):
        body.append(f"    total += (a * {i} + b) % 7 - len(str(total))")
    body.append("    return total")
    return "\n".join(body) + "\n"


def rewrite_cost_ms(tmpdir: str) -> float:
    import importlib.util
    import os
    path = os.path.join(tmpdir, "_bench_fifty.py")
    with open(path, "w") as fh:
        fh.write(fifty_line_function_source("fifty"))
    spec = importlib.util.spec_from_file_location("_bench_fifty", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Fresh(CountContext):  # a new class: nothing cached for it
        pass

    start = time.perf_counter()
    overdub(Fresh(), module.fifty, 1, 2)
    first = time.perf_counter() - start
    return first * 1e3


_CHILD = """
import importlib.util, sys, time
from overdub import overdub
from overdub.contexts import CountContext
spec = importlib.util.spec_from_file_location("_bench_fifty", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
start = time.perf_counter()
overdub(CountContext(), module.fifty, 1, 2)
print((time.perf_counter() - start) * 1e3)
"""


def _first_call_in_a_new_process_ms(tmpdir: str) -> float:
    """The first call's time in a fresh Python whose rewrite cache is ``tmpdir``'s (the first
    such process rewrites and keeps the result on disk; the next one loads it)."""
    import os
    import pathlib
    import subprocess
    path = os.path.join(tmpdir, "_bench_fifty_process.py")
    if not os.path.exists(path):
        with open(path, "w") as fh:
            fh.write(fifty_line_function_source("fifty"))
    root = pathlib.Path(__file__).resolve().parent.parent
    env = dict(os.environ, OVERDUB_CACHE_DIR=os.path.join(tmpdir, "cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(root),
                                                        os.environ.get("PYTHONPATH")])))
    env.pop("OVERDUB_CACHE", None)
    done = subprocess.run([sys.executable, "-c", _CHILD, path], env=env, capture_output=True,
                          text=True, check=True, cwd=tmpdir)
    return float(done.stdout)


def main(quick: bool = False) -> Figures:
    import tempfile
    clock = Clock(quick)
    n, fib_n = (2000, 12) if quick else (20000, 18)
    fig = Figures()
    quiet = f"scalar loop, {n} iterations: context matching nothing"
    counted = f"scalar loop, {n} iterations: CountContext"
    empty = f"scalar loop, {n} iterations: context whose prehook does nothing"
    lorenz = "RK4 Lorenz, 200 steps (calls, tuples): CountContext"
    heavy = f"call-heavy, fib({fib_n}) + 200 rgb_to_hsv: CountContext"
    plain_loop = clock.best(lambda: scalar_loop(n))
    fig.workload(quiet, plain_loop, at_most(1.2))
    fig.workload(counted, plain_loop, at_most(8))
    fig.workload(empty, plain_loop)
    fig.workload(lorenz, clock.best(lambda: lorenz_rk4(1.0, 1.0, 1.0)))
    fig.workload(heavy, clock.best(lambda: call_heavy(fib_n)))
    fig.time(quiet, "overdub", clock.best(lambda: overdub(TanhOnly(), scalar_loop, n)))
    count_s, empty_s = clock.interleaved(lambda: overdub(CountContext(), scalar_loop, n),
                                         lambda: overdub(EmptyPrehook(), scalar_loop, n))
    fig.time(counted, "overdub", count_s)
    fig.time(empty, "overdub", empty_s)
    fig.figure("scalar loop: CountContext / context whose prehook does nothing",
               count_s / empty_s, "x", at_most(1.3))
    fig.time(lorenz, "overdub", clock.best(lambda: overdub(CountContext(), lorenz_rk4, 1.0, 1.0,
                                                           1.0)))
    fig.time(heavy, "overdub", clock.best(lambda: overdub(CountContext(), call_heavy, fib_n)))
    fig.time(heavy, "cProfile", clock.best(lambda: cProfile.Profile().runcall(call_heavy, fib_n)))
    fig.figure("call-heavy: CountContext / cProfile", fig.times[heavy, "overdub"]
               / fig.times[heavy, "cProfile"], "x", at_most(1.5))
    with tempfile.TemporaryDirectory() as tmp:
        fig.figure("first call of a 50-line function under a new context class (rewriting)",
                   rewrite_cost_ms(tmp), "ms", at_most(5))
        first, second = (_first_call_in_a_new_process_ms(tmp) for _ in range(2))
        fig.figure("the same in a new process: rewriting, nothing on disk", first, "ms")
        fig.figure("the same in a second process: the rewrite loaded from disk", second, "ms",
                   at_most(5))
    calls = 200 if quick else 2000
    fig.figure(DIFFERENCES[0], entry_cost_us(clock, CountContext, calls), "us", at_most(2))
    fig.figure(DIFFERENCES[1], entry_cost_us(clock, DoNothing, calls), "us", at_most(2))
    return fig


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    for label, value in main("--quick" in sys.argv).items():
        print(f"{value:10.2f}  {label}")
