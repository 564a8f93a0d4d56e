"""overdub_gpu speed: broadcast of the HM-LSTM kernel, as ratios measured in one process.

Workloads (issue #6), with xp = numpy, n = 2048 (z, zb of shape (n, 1); c, f, i, g (n, n)):
- broadcast(ArrayBackendContext(numpy), hmlstm, ...) against a hand-written NumPy version
  (hand-vectorised with np.where, the direct transliteration of the kernel): target <= 1.5x;
- np.vectorize of the scalar kernel against broadcast: target >= 100x (np.vectorize is timed
  once, on the first 256 rows, scaled to n: it takes seconds).
Also recorded, for information: a hand-written version that computes sigm(i) * tanh(g) once
(the kernel, as written, computes it in both branches that use it).

No GPU is involved: GPUContext runs the same kernel with CuPy, on a machine that has one.

Run: python benchmarks/bench_gpu.py [--quick]
"""

from __future__ import annotations

# _common first: it sets the thread counts before NumPy starts its pool
from _common import Clock, Figures, at_least, at_most

import pathlib
import sys
import time

import numpy as np

from overdub_gpu import ArrayBackendContext, broadcast

# The kernel measured is the example's own (examples/hmlstm_broadcast.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "examples"))
from hmlstm_broadcast import hmlstm  # noqa: E402


def np_sigm(x):
    return 1 / (1 + np.exp(-x))


def hand_written(z, zb, c, f, i, g):
    return np.where(z == 1, np_sigm(i) * np.tanh(g),
                    np.where(zb == 0, c, np_sigm(f) * c + np_sigm(i) * np.tanh(g)))


def hand_written_shared(z, zb, c, f, i, g):
    flush = np_sigm(i) * np.tanh(g)
    return np.where(z == 1, flush, np.where(zb == 0, c, np_sigm(f) * c + flush))


def inputs(n: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, (n, 1)).astype(np.float64)
    zb = rng.integers(0, 2, (n, 1)).astype(np.float64)
    c, f, i, g = rng.standard_normal((4, n, n))
    return z, zb, c, f, i, g


def main(quick: bool = False) -> Figures:
    clock = Clock(quick)
    n = 128 if quick else 2048
    vectorize_rows = n if quick else 256   # np.vectorize takes seconds: timed on a slice
    data = inputs(n)
    ctx = ArrayBackendContext(np)
    out = broadcast(ctx, hmlstm, *data)                 # rewrite once, check once
    assert np.allclose(out, hand_written(*data), rtol=1e-12, atol=1e-15)
    # Interleave the three so that they see the same machine state.
    t_broadcast, t_hand, t_shared = [], [], []
    for _ in range(1 if quick else 3):
        t_broadcast.append(clock.best(lambda: broadcast(ctx, hmlstm, *data), 3, 0.0))
        t_hand.append(clock.best(lambda: hand_written(*data), 3, 0.0))
        t_shared.append(clock.best(lambda: hand_written_shared(*data), 3, 0.0))

    vectorized = np.vectorize(hmlstm)
    rows = tuple(a[:vectorize_rows] for a in data)
    start = time.perf_counter()
    check = vectorized(*rows)
    vectorize_s = (time.perf_counter() - start) * n / vectorize_rows
    assert np.allclose(check, out[:vectorize_rows])

    fig = Figures()
    row = f"HM-LSTM n={n}: broadcast (plain: hand-written np.where)"
    fig.workload(row, min(t_hand), at_most(1.5))
    fig.time(row, "overdub", min(t_broadcast))
    fig.time(row, "np.vectorize", vectorize_s)
    fig.figure(f"HM-LSTM n={n}: np.vectorize's time / broadcast's", vectorize_s / min(t_broadcast),
               "x", at_least(100))
    fig.figure("HM-LSTM: broadcast / hand-written sharing sigm(i)*tanh(g)",
               min(t_broadcast) / min(t_shared))
    if vectorize_rows < n:
        fig.remarks.append(f"np.vectorize is timed once, on the first {vectorize_rows} of the "
                           f"{n} rows, and scaled to all of them.")
    fig.remarks.append(
        f"For scale: np.vectorize / hand-written np.where = {vectorize_s / min(t_hand):.1f}x, "
        f"np.vectorize / hand-written sharing sigm(i)*tanh(g) = "
        f"{vectorize_s / min(t_shared):.1f}x: no NumPy version of this kernel is 100x faster "
        f"than np.vectorize on this machine.")
    return fig


if __name__ == "__main__":
    for label, value in main("--quick" in sys.argv).items():
        print(f"{value:10.2f}  {label}")
