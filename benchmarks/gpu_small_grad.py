"""The small MLP ``grad`` under ``GPUContext`` against PyTorch's, measured in one process.

A device machine's timings can vary by 2x from one process to the next. So a before/after
comparison runs this script alternately with each version on ``PYTHONPATH``, several times, and
compares the ratios each process prints (docs/gpu.md). It needs a CUDA device, CuPy and PyTorch.

Run: python benchmarks/gpu_small_grad.py LABEL
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from gpu_device import SIZES, loss, mlp_data, timed

from overdub import overdub
from overdub_ad import grad
from overdub_gpu import GPUContext, to_device


def main(label: str) -> None:
    import cupy as cp
    import torch
    ctx = GPUContext()
    rng = np.random.default_rng(0)
    host, x, y = mlp_data(SIZES[0], rng)
    params, xd, yd = to_device(ctx, (tuple(host), x, y))
    gradient = grad(loss)
    tparams = [torch.tensor(a, device="cuda", requires_grad=True) for a in host]
    tx, ty = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")

    def torch_grad() -> Any:
        w1, b1, w2, b2 = tparams
        out = torch.tanh(tx @ w1 + b1) @ w2 + b2
        return torch.autograd.grad(((out - ty) ** 2).mean(), tparams)

    sync = cp.cuda.Device().synchronize
    ours, peer, again = (timed(run, wait, 300) * 1e3 for run, wait in (
        (lambda: overdub(ctx, gradient, params, xd, yd), sync),
        (torch_grad, torch.cuda.synchronize),
        (lambda: overdub(ctx, gradient, params, xd, yd), sync)))
    print(f"{label}: grad {ours:.3f} / {again:.3f} ms, PyTorch {peer:.3f} ms, "
          f"ours / PyTorch {min(ours, again) / peer:.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "overdub")
