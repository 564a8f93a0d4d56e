"""overdub on a CUDA device: timings against hand-written CuPy and PyTorch, and where the time goes.

Not part of ``benchmarks/run.py`` (CI's machines and most developers' have no GPU): run it on a
machine with a CUDA device, CuPy and (for the peer) PyTorch with CUDA, and record what it prints
in docs/gpu.md.  Workloads:

- the NumPy MLP loss of examples/ (tanh hidden layer, squared error) and its ``grad`` under
  ``GPUContext``, at a small, a medium and a large size, against the same forward and backward
  pass written by hand in CuPy, and against PyTorch's autograd on the device;
- the HM-LSTM kernel under ``broadcast`` against the hand-written CuPy ``where`` version;
- the device synchronisations one ``grad`` makes (``cupyx.allow_synchronize(False)`` stops at
  the first; each is a host round trip), and a profile of where the host time goes.

Run: python benchmarks/gpu_device.py
"""

from __future__ import annotations

import cProfile
import io
import pathlib
import pstats
import sys
import time
import traceback

import numpy as np

from overdub import overdub
from overdub_ad import grad
from overdub_gpu import GPUContext, broadcast, to_device

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "examples"))
from hmlstm_broadcast import hmlstm  # noqa: E402

SIZES = [(64, 128, 10, 128), (256, 512, 10, 1024), (1024, 4096, 1000, 8192)]


def loss(params, x, y):
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return np.mean((out - y) ** 2)


def hand_grad(cp, params, x, y):
    w1, b1, w2, b2 = params
    h = cp.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    dout = 2.0 * (out - y) / out.size
    dh = (dout @ w2.T) * (1.0 - h * h)
    return x.T @ dh, dh.sum(axis=0), h.T @ dout, dout.sum(axis=0)


def timed(run, sync, repeat):
    for _ in range(3):
        run()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def mlp_data(size, rng):
    """The MLP's parameters, inputs and targets of one size, on the host."""
    n_in, n_hidden, n_out, batch = size
    host = [rng.standard_normal((n_in, n_hidden)) / np.sqrt(n_in),
            rng.standard_normal(n_hidden) * 0.1,
            rng.standard_normal((n_hidden, n_out)) / np.sqrt(n_hidden),
            rng.standard_normal(n_out) * 0.1]
    return host, rng.standard_normal((batch, n_in)), rng.standard_normal((batch, n_out))


def mlp_row(cp, ctx, size, rng, torch):
    """One size's line: our grad, hand-written CuPy, the loss alone, PyTorch."""
    sync = cp.cuda.Device().synchronize
    n_in, n_hidden, n_out, batch = size
    host, x, y = mlp_data(size, rng)
    params, xd, yd = to_device(ctx, (tuple(host), x, y))
    gradient = grad(loss)
    ours = overdub(ctx, gradient, params, xd, yd)
    want = hand_grad(cp, params, xd, yd)
    error = max(float(cp.max(cp.abs(a - b))) for a, b in zip(ours, want))
    repeat = 50 if batch < 4096 else 20
    t_ours = timed(lambda: overdub(ctx, gradient, params, xd, yd), sync, repeat)
    t_hand = timed(lambda: hand_grad(cp, params, xd, yd), sync, repeat)
    t_plain = timed(lambda: overdub(ctx, loss, params, xd, yd), sync, repeat)
    line = (f"MLP {n_in}-{n_hidden}-{n_out}, batch {batch}: grad {t_ours * 1e3:.3f} ms, "
            f"hand-written CuPy {t_hand * 1e3:.3f} ms ({t_ours / t_hand:.2f}x), "
            f"loss alone under GPUContext {t_plain * 1e3:.3f} ms; max |diff| {error:.1e}")
    if torch is not None:
        tparams = [torch.tensor(a, device="cuda", requires_grad=True) for a in host]
        tx, ty = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")

        def torch_grad():
            w1, b1, w2, b2 = tparams
            out = torch.tanh(tx @ w1 + b1) @ w2 + b2
            return torch.autograd.grad(((out - ty) ** 2).mean(), tparams)
        t_torch = timed(torch_grad, torch.cuda.synchronize, repeat)
        line += f"; PyTorch {t_torch * 1e3:.3f} ms (ours / PyTorch {t_ours / t_torch:.2f}x)"
    print(line, flush=True)
    return params, xd, yd


def where_time_goes(cp, ctx, params, xd, yd):
    """The first device synchronisation of one grad, and a profile of 20."""
    gradient = grad(loss)
    try:
        import cupyx
        with cupyx.allow_synchronize(False):
            overdub(ctx, gradient, params, xd, yd)
        print("synchronisations in one small grad: none")
    except Exception as error:
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if "site-packages" not in f.filename]
        print(f"the first synchronisation in one small grad: {type(error).__name__}: {error}")
        for frame in frames[-8:]:
            print(f"    {frame.filename}:{frame.lineno} {frame.name}: {frame.line}")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(20):
        overdub(ctx, gradient, params, xd, yd)
    cp.cuda.Device().synchronize()
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(18)
    print("profile of 20 small grads (host time, by own time):")
    print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))


def main() -> None:
    import cupy as cp
    ctx = GPUContext()
    sync = cp.cuda.Device().synchronize
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, "
          f"CuPy {cp.__version__}, NumPy {np.__version__}, Python {sys.version.split()[0]}")
    try:
        import torch
        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    rows = [mlp_row(cp, ctx, size, rng, torch) for size in SIZES]
    where_time_goes(cp, ctx, *rows[0])

    rng = np.random.default_rng(1)
    n = 4096
    z = cp.asarray(rng.integers(0, 2, (n, 1)).astype(np.float64))
    zb = cp.asarray(rng.integers(0, 2, (n, 1)).astype(np.float64))
    c, f, i, g = (cp.asarray(a) for a in rng.standard_normal((4, n, n)))

    def sigm(v):
        return 1 / (1 + cp.exp(-v))

    def hand(z, zb, c, f, i, g):
        return cp.where(z == 1, sigm(i) * cp.tanh(g),
                        cp.where(zb == 0, c, sigm(f) * c + sigm(i) * cp.tanh(g)))
    out = broadcast(ctx, hmlstm, z, zb, c, f, i, g)
    error = float(cp.max(cp.abs(out - hand(z, zb, c, f, i, g))))
    t_ours = timed(lambda: broadcast(ctx, hmlstm, z, zb, c, f, i, g), sync, 20)
    t_hand = timed(lambda: hand(z, zb, c, f, i, g), sync, 20)
    print(f"HM-LSTM broadcast n={n}: {t_ours * 1e3:.3f} ms, hand-written CuPy "
          f"{t_hand * 1e3:.3f} ms ({t_ours / t_hand:.2f}x); max |diff| {error:.1e}")


if __name__ == "__main__":
    main()
