"""overdub in one screen: run ordinary Python inside contexts that see every call it makes.

    python examples/quickstart.py

Four short demos of the core: logging, counting (through C's ``map``), tracing, and a primitive
that replaces ``math.sin`` inside one context only; then the two plug-ins built on it:
derivatives (``overdub_ad``) and another array backend (``overdub_gpu``).  See docs/index.md.
"""

import io
import math
from math import sin  # `math.sin(t)` works too; the log would also show getattr(math, 'sin')

import numpy as np

from overdub import Context, overdub
from overdub.contexts import CountContext, LogContext, TraceContext, describe
from overdub_ad import D, grad
from overdub_gpu import ArrayBackendContext, GPUContext, GPUUnavailableError, to_device, to_host


def wave(t):
    return 2.0 * sin(t) + t / 2


def numbers():
    return list(map(str, range(1, 11)))


def f(x, y, z):
    return x * y + y * z


def loss(w):
    return np.sum(np.tanh(w) ** 2) / 2


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
    in_degrees = overdub(Degrees(), wave, 30.0)
    print(f"   overdub(Degrees(), wave, 30.0) = {in_degrees:.6f}  (sin(30 deg) = 0.5)")
    print(f"   wave(30.0)                     = {wave(30.0):.6f}  (sin(30 rad), untouched)\n")

    print("5. Derivatives, nested without confusion, and a NumPy gradient (overdub_ad):")
    nested = D(lambda x: x * D(lambda y: x * y, 3.0), 5.0)
    print(f"   D(x * D(y -> x*y)(3))(5)       = {nested}")
    print(f"   D(wave)(1.0)                   = {D(wave, 1.0):.6f}  (2 cos 1 + 1/2)")
    print(f"   grad(loss)(ones(3))            = {grad(loss)(np.ones(3))}\n")

    print("6. The same NumPy code on another array backend (overdub_gpu):")
    try:
        backend, where = GPUContext(), "the GPU (CuPy)"
    except GPUUnavailableError as missing:
        backend, where = ArrayBackendContext(np), "the CPU (NumPy)"
        reason = str(missing).split(":")[0]
        print(f"   no GPU here ({reason}): using ArrayBackendContext(numpy)")
    value = to_host(backend, overdub(backend, loss, to_device(backend, np.ones(3))))
    print(f"   loss(ones(3)) on {where} = {float(value):.6f}  (plain NumPy: "
          f"{loss(np.ones(3)):.6f})")


if __name__ == "__main__":
    main()
