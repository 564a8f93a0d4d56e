"""Core overhead: overdubbed time / plain time, measured in one process.

Workloads (issue #2):
- a scalar-arithmetic-heavy loop under a context that intercepts nothing it could match
  (a primitive for math.tanh, which the loop never calls): target <= 1.2x;
- the same loop under CountContext (every call and operator intercepted): target <= 8x;
- a call-heavy workload (fib(18) plus 200 colorsys.rgb_to_hsv calls) under CountContext,
  against cProfile on the same workload: target <= 1.5x cProfile's time;
- the first call of a 50-line function under a new context class (rewriting): target <= 5 ms.

Run: python benchmarks/bench_core.py
"""

from __future__ import annotations

import colorsys
import cProfile
import math
import platform
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


def call_heavy() -> float:
    total = float(fib(18))
    for i in range(200):
        h, s, v = colorsys.rgb_to_hsv(i / 200, 0.5, 1 - i / 400)
        total += h + s + v
    return total


class TanhOnly(Context):
    """A context whose only primitive (math.tanh) the workloads never call."""


@TanhOnly.primitive(math.tanh)
def _tanh(ctx: Context, x: float) -> float:
    return math.tanh(x)


def best_of(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


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


def main() -> dict[str, float]:
    import tempfile
    n = 20000
    plain = best_of(lambda: scalar_loop(n))
    quiet = best_of(lambda: overdub(TanhOnly(), scalar_loop, n))
    counted = best_of(lambda: overdub(CountContext(), scalar_loop, n))
    lorenz_plain = best_of(lambda: lorenz_rk4(1.0, 1.0, 1.0))
    lorenz_counted = best_of(lambda: overdub(CountContext(), lorenz_rk4, 1.0, 1.0, 1.0))
    heavy_plain = best_of(call_heavy)
    heavy_counted = best_of(lambda: overdub(CountContext(), call_heavy))

    def profiled() -> None:
        profiler = cProfile.Profile()
        profiler.runcall(call_heavy)

    heavy_profiled = best_of(profiled)
    with tempfile.TemporaryDirectory() as tmp:
        first_ms = rewrite_cost_ms(tmp)
    results = {
        "scalar loop, no-match context / plain (target <= 1.2)": quiet / plain,
        "scalar loop, CountContext / plain (target <= 8)": counted / plain,
        "RK4 Lorenz (calls, tuples, arithmetic), CountContext / plain": lorenz_counted / lorenz_plain,
        "call-heavy, cProfile / plain": heavy_profiled / heavy_plain,
        "call-heavy, CountContext / plain": heavy_counted / heavy_plain,
        "call-heavy, CountContext / cProfile (target <= 1.5)": heavy_counted / heavy_profiled,
        "first call of a 50-line function, new context class, ms (target <= 5)": first_ms,
    }
    print(f"Python {platform.python_version()} on {platform.machine()} ({platform.processor() or 'cpu'})")
    for name, value in results.items():
        print(f"{value:8.2f}  {name}")
    return results


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
