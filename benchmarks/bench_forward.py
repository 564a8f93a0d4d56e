"""Forward-mode AD: derivative time / plain time, against autograd, eager JAX and PyTorch.

Workloads (issue #4), each run by every installed tool in this process, results checked
against ours before anything is timed:
- RK4 integration of the Lorenz system, 200 steps, in a plain Python loop of float arithmetic:
  ``jvp`` (target <= 15x plain); autograd ``make_jvp``, ``jax.jvp`` (eager, no ``jit``),
  ``torch.func.jvp``, all on the same Python function;
- the nested derivative ``D(lambda x: x * D(lambda y: x*y, 3.0), 5.0)`` (= 10) per call, and
  the same nesting of autograd's ``make_jvp``, ``jax.jvp`` and ``torch.func.jvp`` (target: ours
  at least 5x faster than autograd);
- ``jacfwd`` of ``f(x) = sin(W @ tanh(x)) * x + sum(x**2)`` at n=100, one pass of 100
  directions and chunks of 10 (target <= n/k + 2 evaluations of f; the wall time is reported
  too); ``jax.jacfwd`` and
  ``torch.func.jacfwd`` (eager, batched tangents), autograd as n ``make_jvp`` passes (it has no
  batched forward mode).

Run: python benchmarks/bench_forward.py [--quick]
"""

from __future__ import annotations

# _common first: it sets the thread counts before NumPy starts its pool
from _common import Clock, Figures, agree, at_least, at_most, lorenz_rk4, peer

import importlib
import sys

import numpy as np

from overdub_ad import D, jacfwd, jvp


def nested_plain(x):
    """What the nested derivative evaluates, without derivatives: the plain time's unit."""
    return x * (lambda y: x * y)(3.0)


def make_jac_fn(xp, w):
    """``f(x) = sin(W @ tanh(x)) * x + sum(x**2)`` written against the array module ``xp``."""
    def f(x):
        return xp.sin(w @ xp.tanh(x)) * x + xp.sum(x ** 2)
    return f


def main(quick: bool = False) -> Figures:
    clock = Clock(quick)
    steps, n = (3, 20) if quick else (200, 100)
    chunk = n // 10
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, n)) / np.sqrt(n)
    x = rng.standard_normal(n)
    fig = Figures()

    # -- RK4 Lorenz, jvp ------------------------------------------------------------------------
    lz = f"RK4 Lorenz, {steps} steps, scalar loop: jvp"
    _, ours_lz = jvp(lambda x0: lorenz_rk4(x0, steps), (1.0,), (1.0,))
    fig.workload(lz, clock.best(lambda: lorenz_rk4(1.0, steps)), at_most(15))
    fig.time(lz, "overdub", clock.best(lambda: jvp(lambda x0: lorenz_rk4(x0, steps),
                                                   (1.0,), (1.0,))))

    # -- nested D --------------------------------------------------------------------------------
    nd = "nested D(x * D(y -> x*y, 3), 5), per call"
    assert D(lambda x: x * D(lambda y: x * y, 3.0), 5.0) == 10.0
    calls = 1000
    fig.workload(nd, clock.best(lambda: [nested_plain(5.0) for _ in range(calls)]) / calls)
    fig.time(nd, "overdub", clock.best(lambda: D(lambda x: x * D(lambda y: x * y, 3.0), 5.0)))

    # -- jacfwd ----------------------------------------------------------------------------------
    f = make_jac_fn(np, w)
    jac = jacfwd(f)(x)
    agree(jacfwd(f, chunk=chunk)(x), jac, "jacfwd in chunks")
    jf = f"jacfwd n={n}, one pass of {n} directions"
    jc = f"jacfwd n={n}, chunks of {chunk}"
    plain_f = clock.best(lambda: f(x))
    fig.workload(jf, plain_f)
    fig.workload(jc, plain_f)
    fig.time(jf, "overdub", clock.best(lambda: jacfwd(f)(x)))
    fig.time(jc, "overdub", clock.best(lambda: jacfwd(f, chunk=chunk)(x)))
    # The target counts evaluations of f (each carrying k directions as one batched tangent),
    # not wall time: at n=100 the time is per-operation overhead, and the batched tangent's
    # array work (W @ a 100 x k block) is k matrix-vector products by nature.
    evaluations = []

    def counted(v):
        evaluations.append(1)
        return f(v)

    for k, label in ((n, "one pass"), (chunk, f"chunks of {chunk}")):
        evaluations.clear()
        jacfwd(counted, chunk=k)(x)
        fig.figure(f"jacfwd n={n}, {label}: evaluations of f per Jacobian",
                   float(len(evaluations)), unit="", target=at_most(n / k + 2))

    # -- peers -----------------------------------------------------------------------------------
    ag = peer("autograd")
    if ag is None:
        for row in (lz, nd, jf):
            fig.note(row, "autograd", "not installed")
    else:
        anp = importlib.import_module("autograd.numpy")
        agree(ag.make_jvp(lambda x0: lorenz_rk4(x0, steps))(1.0)(1.0)[1], ours_lz, "autograd " + lz)
        fig.time(lz, "autograd", clock.best(
            lambda: ag.make_jvp(lambda x0: lorenz_rk4(x0, steps))(1.0)(1.0), repeat=3))

        def ag_nested():
            inner = lambda x: x * ag.make_jvp(lambda y: x * y)(3.0)(1.0)[1]  # noqa: E731
            return ag.make_jvp(inner)(5.0)(1.0)[1]

        agree(ag_nested(), 10.0, "autograd " + nd)
        fig.time(nd, "autograd", clock.best(ag_nested))
        af = make_jac_fn(anp, w)
        basis = np.eye(n)

        def ag_jac():
            push = ag.make_jvp(af)(x)
            return np.stack([push(e)[1] for e in basis], axis=-1)

        agree(ag_jac(), jac, "autograd " + jf)
        fig.time(jf, "autograd", clock.best(ag_jac, repeat=3))

    jax = peer("jax")
    if jax is None:
        for row in (lz, nd, jf):
            fig.note(row, "jax", "not installed")
    else:
        def jax_lz():
            return jax.block_until_ready(jax.jvp(lambda x0: lorenz_rk4(x0, steps), (1.0,), (1.0,)))

        agree(jax_lz()[1], ours_lz, "jax " + lz)
        fig.time(lz, "jax", clock.slow(jax_lz))

        def jax_nested():
            inner = lambda x: x * jax.jvp(lambda y: x * y, (3.0,), (1.0,))[1]  # noqa: E731
            return jax.block_until_ready(jax.jvp(inner, (5.0,), (1.0,))[1])

        agree(jax_nested(), 10.0, "jax " + nd)
        fig.time(nd, "jax", clock.best(jax_nested))
        jf_jax = make_jac_fn(jax.numpy, jax.numpy.asarray(w))
        jx = jax.numpy.asarray(x)
        agree(jax.jacfwd(jf_jax)(jx), jac, "jax " + jf)
        fig.time(jf, "jax", clock.best(lambda: jax.jacfwd(jf_jax)(jx).block_until_ready()))

    torch = peer("torch")
    if torch is None:
        for row in (lz, nd, jf):
            fig.note(row, "torch", "not installed")
    else:
        def scalar(v):
            return torch.tensor(v, dtype=torch.float64)

        one = scalar(1.0)

        def torch_lz():
            return torch.func.jvp(lambda x0: lorenz_rk4(x0, steps), (one,), (one,))

        agree(torch_lz()[1], ours_lz, "torch " + lz)
        fig.time(lz, "torch", clock.slow(torch_lz))
        three, five = scalar(3.0), scalar(5.0)

        def torch_nested():
            inner = lambda x: x * torch.func.jvp(lambda y: x * y, (three,), (one,))[1]  # noqa: E731
            return torch.func.jvp(inner, (five,), (one,))[1]

        agree(torch_nested(), 10.0, "torch " + nd)
        fig.time(nd, "torch", clock.best(torch_nested))
        tf = make_jac_fn(torch, torch.tensor(w))
        tx = torch.tensor(x)
        agree(torch.func.jacfwd(tf)(tx), jac, "torch " + jf)
        fig.time(jf, "torch", clock.best(lambda: torch.func.jacfwd(tf)(tx)))

    if ag is not None:
        fig.figure("nested D: autograd's time / ours", fig.times[nd, "autograd"]
                   / fig.times[nd, "overdub"], "x", at_least(5))
    return fig


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    for label, value in main("--quick" in sys.argv).items():
        print(f"{value:12.2f}  {label}")
