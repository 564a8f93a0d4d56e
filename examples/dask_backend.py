"""Beyond one machine: the same NumPy code, and its gradient, computed by a Dask cluster.

ArrayBackendContext(dask.array) swaps every NumPy call for its dask.array counterpart, so plain
NumPy code builds a lazy, chunked task graph instead of computing in memory, and so does its
gradient.  to_host computes the graph on whatever scheduler is active: here a distributed.Client
over a LocalCluster of separate worker *processes*, the scheduler users scale out with (give
Client a real cluster's address instead and nothing else changes).  Needs the dask extra:

    python -m pip install ".[dask]" && python examples/dask_backend.py
"""

import math
import os

import numpy as np

from overdub import overdub
from overdub_ad import grad
from overdub_gpu import ArrayBackendContext, broadcast, to_device, to_host


def normalise_columns(x):
    centred = x - np.mean(x, axis=0)
    scaled = centred / np.std(centred, axis=0)
    return scaled, np.sqrt(np.sum(scaled ** 2, axis=0) / x.shape[0])


def energy(x):
    """A smooth scalar of the whole array, to differentiate."""
    scaled, _ = normalise_columns(x)
    return np.sum(np.tanh(scaled) * x) / x.size


def softplus(x):
    if x > 20:
        return x
    return math.log1p(math.exp(x))


def run_on(client, da):
    """The NumPy code, its gradient and a broadcast kernel on the cluster behind `client`;
    each result is checked against the same code run by NumPy on the host.  Returns the
    number of tasks the cluster ran and the worker addresses that ran them."""
    from distributed import get_task_stream

    ctx = ArrayBackendContext(da)
    host = np.random.default_rng(0).random((600, 400))
    with get_task_stream(client) as stream:
        data = to_device(ctx, host)
        scaled, norms = overdub(ctx, normalise_columns, data)
        print(f"result: {type(scaled).__module__}.{type(scaled).__name__}, "
              f"{scaled.numblocks[0] * scaled.numblocks[1]} chunks")
        assert np.allclose(to_host(ctx, scaled), normalise_columns(host)[0])
        assert np.allclose(to_host(ctx, norms), 1.0)
        print("column norms: all 1, as NumPy computes them")

        gradient = overdub(ctx, grad(energy), data)        # reverse mode, as a Dask graph
        assert isinstance(gradient, da.Array)
        assert np.allclose(to_host(ctx, gradient), grad(energy)(host), rtol=1e-10, atol=1e-13)
        print("grad(energy): equal to the gradient NumPy computes")

        x = to_device(ctx, np.linspace(-30, 30, 200_001))
        y = to_host(ctx, broadcast(ctx, softplus, x))     # a scalar kernel, chunk by chunk
        assert np.allclose(y, [softplus(v) for v in np.linspace(-30, 30, 200_001)])
        print(f"softplus over {x.shape[0]} points in {x.numblocks[0]} chunks: "
              f"{y[-1]:.1f} at x=30")
    return len(stream.data), {task["worker"] for task in stream.data}


def main():
    try:
        import dask
        import dask.array as da
        from distributed import Client, LocalCluster
    except ImportError:
        print('dask is not installed (python -m pip install ".[dask]"): nothing to show')
        return

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client, \
            dask.config.set({"array.chunk-size": "256KiB"}):
        tasks, workers = run_on(client, da)
        pids = set(client.run(os.getpid).values())
        print(f"the cluster ran {tasks} tasks on {len(workers)} worker processes")
        assert len(pids) == 2 and os.getpid() not in pids
        print("every worker is a process of its own")


if __name__ == "__main__":
    main()
