"""Tagging overhead (issue #3): per-operation costs in microseconds, measured in one process,
with each cost's ratio to a plain Python function call measured in the same run.

Operations:
- ``tag(1.0, ctx, 2.0)``: target <= 1 us;
- ``untag(x, ctx)`` and ``metadata(x, ctx)`` on a tagged float: target <= 1 us;
- one tagged arithmetic operation (``x * 3.0``) under a context whose primitive for
  ``operator.mul`` with ``types=(Tagged, float)`` propagates the metadata: target <= 1 us
  (the loop's cost with the operation minus the same loop without it, per iteration);
- for reference: one plain ``x * 3.0`` under the same context (no tag involved), an attribute
  store + load of a tagged value, and a tagged NumPy element write + read;
- shadow memory for tagged writes into 510,000 elements of a 10^6-element float64 array
  (10^4 single-element writes, then every other element from a tagged block), as a multiple
  of the array's size (target: about one array, not an object per element).

Run: python benchmarks/bench_tagging.py
"""

from __future__ import annotations

import gc
import operator
import platform
import sys
import time
import timeit
import tracemalloc

import numpy as np

from overdub import Context, Tagged, metadata, overdub, tag, untag


class Scale(Context):
    """A context whose only primitive, ``Tagged * float``, scales the metadata."""


@Scale.primitive(operator.mul, types=(Tagged, float))
def _mul(ctx: Context, a: Tagged, b: float) -> Tagged:
    return tag(untag(a, ctx) * b, ctx, metadata(a, ctx) * b)


class Box:
    pass


def plain_call(a):
    return a


def loop_mul(x, n):
    y = x
    for _ in range(n):
        y = x * 3.0
    return y


def loop_empty(x, n):
    y = x
    for _ in range(n):
        y = x
    return y


def loop_store_attr(x, n):
    b = Box()
    y = x
    for _ in range(n):
        b.v = x
        y = b.v
    return y


def loop_store_array(x, n):
    a = np.zeros(8)
    y = x
    for _ in range(n):
        a[3] = x
        y = a[3]
    return y


def fill_every(arr, t, step, block):
    for i in range(0, len(arr), step):
        arr[i] = t
    arr[1::2] = block
    return arr[0]


def best_us(stmt: str, names: dict, number: int, repeat: int = 7) -> float:
    """Best-of-``repeat`` time of ``number`` runs of ``stmt``, per run, in microseconds."""
    return min(timeit.repeat(stmt, globals=names, number=number, repeat=repeat)) / number * 1e6


def per_iteration_us(ctx: Context, body, x, n: int, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        overdub(ctx, body, x, n)
        times.append(time.perf_counter() - start)
    return min(times) / n * 1e6


def shadow_memory_ratio() -> float:
    ctx = Scale()
    t = tag(1.5, ctx, 0.25)
    arr = np.zeros(10**6)
    block = tag(np.ones(arr.size // 2), ctx, np.full(arr.size // 2, 0.5))
    small = tag(np.ones(100), ctx, np.full(100, 0.5))
    overdub(ctx, fill_every, np.zeros(200), t, 100, small)  # rewrite once, not measured
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        overdub(ctx, fill_every, arr, t, 100, block)
        # the shadow lives while the run does (dropped when it returns): measure its peak
        return (tracemalloc.get_traced_memory()[1] - base) / arr.nbytes
    finally:
        tracemalloc.stop()


def main() -> dict[str, float]:
    ctx = Scale()
    x = tag(1.0, ctx, 2.0)
    check = overdub(ctx, loop_mul, x, 3)
    assert untag(check, ctx) == 3.0 and metadata(check, ctx) == 6.0
    n = 200_000
    names = {"plain_call": plain_call, "tag": tag, "untag": untag, "metadata": metadata,
             "ctx": ctx, "x": x}
    call = best_us("plain_call(1.0)", names, n)
    tagging = best_us("tag(1.0, ctx, 2.0)", names, n)
    untagging = best_us("untag(x, ctx)", names, n)
    reading = best_us("metadata(x, ctx)", names, n)
    loops = 50_000
    empty = per_iteration_us(ctx, loop_empty, x, loops)
    tagged_op = per_iteration_us(ctx, loop_mul, x, loops) - empty
    plain_op = per_iteration_us(ctx, loop_mul, 1.0, loops) - per_iteration_us(ctx, loop_empty,
                                                                               1.0, loops)
    attr = per_iteration_us(ctx, loop_store_attr, x, loops) - empty
    array = per_iteration_us(ctx, loop_store_array, x, loops) - empty
    costs = {
        "tag(1.0, ctx, 2.0) (target <= 1 us)": tagging,
        "untag(x, ctx) (target <= 1 us)": untagging,
        "metadata(x, ctx)": reading,
        "tagged x * 3.0 via a primitive (target <= 1 us)": tagged_op,
        "plain 1.0 * 3.0 under the same context": plain_op,
        "tagged attribute store + load": attr,
        "tagged NumPy element write + read": array,
    }
    print(f"Python {platform.python_version()} on {platform.machine()} "
          f"({platform.processor() or 'cpu'}), NumPy {np.__version__}")
    print(f"{call:8.3f} us  plain Python function call (the ratio's unit)")
    print(f"{'us':>8}  {'x call':>8}")
    for name, value in costs.items():
        print(f"{value:8.3f}  {value / call:8.1f}  {name}")
    ratio = shadow_memory_ratio()
    print(f"{ratio:8.3f}  {'':8}  shadow memory for tagged writes into 510,000 elements of a "
          f"10^6-element float64 array, x the array's size (target ~1)")
    return {**costs, "plain call": call, "shadow memory ratio (peak during the run, x the array size)": ratio}


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
