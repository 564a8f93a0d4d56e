"""Beyond one machine: the same NumPy code, run as a chunked Dask graph.

ArrayBackendContext(dask.array) swaps every NumPy call for its dask.array counterpart, so
plain NumPy code builds a lazy, chunked task graph instead of computing in memory.  to_host
computes it (here with Dask's local threaded scheduler; a distributed.Client would spread
it over a cluster).  Dask is optional: pip install "dask[array]".

    python examples/dask_backend.py
"""

import math

import numpy as np

from overdub import overdub
from overdub_gpu import ArrayBackendContext, broadcast, to_device, to_host


def normalise_columns(n):
    x = np.random.random((n, n))
    centred = x - np.mean(x, axis=0)
    scaled = centred / np.std(centred, axis=0)
    return scaled, np.sqrt(np.sum(scaled ** 2, axis=0) / n)


def softplus(x):
    if x > 20:
        return x
    return math.log1p(math.exp(x))


def main():
    try:
        import dask
        import dask.array as da
    except ImportError:
        print("dask is not installed (pip install 'dask[array]'): nothing to show")
        return

    ctx = ArrayBackendContext(da)
    with dask.config.set({"array.chunk-size": "1MiB"}):
        scaled, norms = overdub(ctx, normalise_columns, 1000)
        print(f"result: {type(scaled).__module__}.{type(scaled).__name__}, "
              f"{scaled.numblocks[0] * scaled.numblocks[1]} chunks, "
              f"{len(scaled.__dask_graph__())} tasks")
        host = to_host(ctx, norms)                    # computed here, on the local scheduler
        print(f"column norms: min {host.min():.6f}, max {host.max():.6f} (all 1)")
        assert np.allclose(host, 1.0)

        x = to_device(ctx, np.linspace(-30, 30, 2_000_001))
        y = broadcast(ctx, softplus, x)               # a scalar kernel, chunk by chunk
        print(f"softplus over {x.shape[0]} points in {y.numblocks[0]} chunks: "
              f"{float(to_host(ctx, y)[-1]):.1f} at x=30")


if __name__ == "__main__":
    main()
