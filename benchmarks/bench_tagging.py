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

Run: python benchmarks/bench_tagging.py [--quick]
"""

from __future__ import annotations

# _common first: it sets the thread counts before NumPy starts its pool
from _common import Figures, at_most

import gc
import operator
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


def best_us(stmt: str, names: dict, number: int, repeat: int) -> float:
    """Best-of-``repeat`` time of ``number`` runs of ``stmt``, per run, in microseconds."""
    return min(timeit.repeat(stmt, globals=names, number=number, repeat=repeat)) / number * 1e6


def per_iteration_us(ctx: Context, body, x, n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        overdub(ctx, body, x, n)
        times.append(time.perf_counter() - start)
    return min(times) / n * 1e6


def shadow_memory_ratio(size: int) -> float:
    ctx = Scale()
    t = tag(1.5, ctx, 0.25)
    arr = np.zeros(size)
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


def main(quick: bool = False) -> Figures:
    ctx = Scale()
    x = tag(1.0, ctx, 2.0)
    check = overdub(ctx, loop_mul, x, 3)
    assert untag(check, ctx) == 3.0 and metadata(check, ctx) == 6.0
    n, loops, size, repeat = (20_000, 5_000, 10**5, 2) if quick else (200_000, 50_000, 10**6, 7)
    names = {"plain_call": plain_call, "tag": tag, "untag": untag, "metadata": metadata,
             "ctx": ctx, "x": x}
    call = best_us("plain_call(1.0)", names, n, repeat)
    empty = per_iteration_us(ctx, loop_empty, x, loops, repeat)
    plain_empty = per_iteration_us(ctx, loop_empty, 1.0, loops, repeat)
    costs = {
        "tag(1.0, ctx, 2.0)": (best_us("tag(1.0, ctx, 2.0)", names, n, repeat), 1.0),
        "untag(x, ctx)": (best_us("untag(x, ctx)", names, n, repeat), 1.0),
        "metadata(x, ctx)": (best_us("metadata(x, ctx)", names, n, repeat), None),
        "tagged x * 3.0 via a primitive":
            (per_iteration_us(ctx, loop_mul, x, loops, repeat) - empty, 1.0),
        "plain 1.0 * 3.0 under the same context":
            (per_iteration_us(ctx, loop_mul, 1.0, loops, repeat) - plain_empty, None),
        "tagged attribute store + load":
            (per_iteration_us(ctx, loop_store_attr, x, loops, repeat) - empty, None),
        "tagged NumPy element write + read":
            (per_iteration_us(ctx, loop_store_array, x, loops, repeat) - empty, None),
    }
    fig = Figures()
    fig.figure("plain Python function call (the unit of the ratios below)", call, "us")
    for name, (us, bound) in costs.items():
        fig.figure(name, us, "us", None if bound is None else at_most(bound))
        fig.figure(f"{name} / plain call", us / call)
    fig.figure(f"shadow memory of tagged writes into {size * 51 // 100:,} of {size:,} float64 "
               f"elements: peak / array size (target about 1)", shadow_memory_ratio(size))
    return fig


if __name__ == "__main__":
    for label, value in main("--quick" in sys.argv).items():
        print(f"{value:10.3f}  {label}")
