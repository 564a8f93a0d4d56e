"""overdub in one screen: run ordinary Python inside contexts that see every call it makes.

    python examples/quickstart.py

Four short demos of the core: logging, counting (through C's ``map``), tracing, and a primitive
that replaces ``math.sin`` inside one context only.  See docs/index.md for the rest.
"""

import io
import math
from math import sin  # `math.sin(t)` works too; the log would also show getattr(math, 'sin')

from overdub import Context, overdub
from overdub.contexts import CountContext, LogContext, TraceContext, describe


def wave(t):
    return 2.0 * sin(t) + t / 2


def numbers():
    return list(map(str, range(1, 11)))


def f(x, y, z):
    return x * y + y * z


class Degrees(Context):
    """A context in which math.sin takes degrees; everywhere else it takes radians."""


@Degrees.primitive(math.sin)
def _sin_in_degrees(ctx, x):
    return math.sin(math.radians(x))


def main():
    print("1. LogContext prints every call and operator of wave(1.0):")
    log = io.StringIO()
    result = overdub(LogContext(file=log), wave, 1.0)
    print("   " + log.getvalue().rstrip().replace("\n", "\n   "))
    print(f"   -> {result:.6f}, the same as wave(1.0) = {wave(1.0):.6f}\n")

    print("2. CountContext on list(map(str, range(1, 11))):")
    counter = CountContext()
    overdub(counter, numbers)
    for fn, n in counter.counts.most_common():
        print(f"   {describe(fn):8} called {n:2} time{'s' if n > 1 else ''}")
    print(f"   -> the {counter.counts[str]} str calls happen inside C's map, and are seen\n")

    print("3. TraceContext renders the call tree of f(x, y, z) = x*y + y*z:")
    tracer = TraceContext()
    overdub(tracer, f, 1, 2, 3)
    print("   " + tracer.render().replace("\n", "\n   ") + "\n")

    print("4. A primitive replaces math.sin inside one context only:")
    print(f"   overdub(Degrees(), wave, 30.0) = {overdub(Degrees(), wave, 30.0):.6f}  (sin(30 deg) = 0.5)")
    print(f"   wave(30.0)                     = {wave(30.0):.6f}  (sin(30 rad), untouched)")

    # TODO(#4): automatic differentiation demo goes here (overdub_ad: derivative(wave)(1.0)
    # against 2*cos(1) + 1/2, and grad of a small NumPy function).

    # TODO(#6): GPU demo goes here (overdub_gpu: the same NumPy code under GPUContext(), or
    # ArrayBackendContext(numpy) when no CUDA device is present).


if __name__ == "__main__":
    main()
