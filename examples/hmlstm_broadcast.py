"""The HM-LSTM kernel of the Cassette.jl talk, broadcast over whole arrays.

The kernel is written for one element, with if/elif/else.  broadcast() runs it once on whole
arrays: a pass turns the branches into where() selections.  The same code runs with NumPy,
with array_api_strict (a strict array-API namespace, if installed) and, on a machine with an
NVIDIA GPU and CuPy, with GPUContext().

    python examples/hmlstm_broadcast.py
"""

import math
import time

import numpy as np

from overdub_gpu import (ArrayBackendContext, GPUContext, GPUUnavailableError, broadcast,
                         to_device, to_host)


def sigm(x):
    return 1 / (1 + math.exp(-x))


def hmlstm(z, zb, c, f, i, g):
    if z == 1:  # FLUSH
        return sigm(i) * math.tanh(g)
    elif zb == 0:  # COPY
        return c
    else:  # UPDATE
        return sigm(f) * c + sigm(i) * math.tanh(g)


def inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, (n, 1)).astype(np.float64)
    zb = rng.integers(0, 2, (n, 1)).astype(np.float64)
    c, f, i, g = rng.standard_normal((4, n, n))
    return z, zb, c, f, i, g


def per_element(z, zb, c, f, i, g):
    out = np.empty(c.shape)
    for a in range(c.shape[0]):
        for b in range(c.shape[1]):
            out[a, b] = hmlstm(z[a, 0], zb[a, 0], c[a, b], f[a, b], i[a, b], g[a, b])
    return out


def main():
    n = 200
    data = inputs(n)
    start = time.perf_counter()
    want = per_element(*data)
    loop_s = time.perf_counter() - start

    contexts = [("numpy", ArrayBackendContext(np))]
    try:
        import array_api_strict
        contexts.append(("array_api_strict", ArrayBackendContext(array_api_strict)))
    except ImportError:
        print("array_api_strict not installed: skipping it")
    try:
        contexts.append(("cupy (GPU)", GPUContext()))
    except GPUUnavailableError as error:
        print(f"no GPU here: {str(error).split(':')[0]}")

    print(f"per-element Python loop, n={n}: {loop_s * 1e3:8.1f} ms")
    for name, ctx in contexts:
        args = to_device(ctx, data)
        broadcast(ctx, hmlstm, *args)                      # first call rewrites the kernel
        start = time.perf_counter()
        out = broadcast(ctx, hmlstm, *args)
        seconds = time.perf_counter() - start
        error = np.abs(to_host(ctx, out) - want).max()
        print(f"broadcast on {name:17s} {seconds * 1e3:8.1f} ms   "
              f"{type(out).__module__}.{type(out).__name__}, max error {error:.1e}")
        assert error < 1e-12


if __name__ == "__main__":
    main()
