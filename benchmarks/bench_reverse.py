"""Reverse-mode AD: gradient time / plain time, against autograd, eager JAX and eager PyTorch.

Workloads (issue #5), each run by every installed tool in this process, results checked
against ours before anything is timed (the plain time is always the NumPy/Python function's):
- Rosenbrock over n=100 in a Python loop of scalar indexing and arithmetic: ``grad`` (target
  <= 30x plain, more than 5x faster than the fastest peer and 10x faster than autograd);
- RK4 integration of the Lorenz system, 200 steps, scalar Python loop: ``grad`` (same targets);
- an MLP, 3 layers of 256 tanh units, batch 64: ``grad`` of the squared-error loss (target:
  within 1.15x of the hand-written NumPy backprop in this file, faster than autograd and JAX;
  PyTorch runs its own kernels, and its figure is reported as measured);
- ``hvp`` of the vectorised Rosenbrock function, n=1000 (target <= 10x plain): ours forward
  over reverse (compiled from the source of this straight-line function; the same function
  with an ``if`` added is also timed, for the tape route every other function takes),
  autograd's ``hessian_vector_product``, ``jax.jvp`` of ``jax.grad`` (eager),
  PyTorch's double backward (``create_graph=True``);
- the mutation challenge: ``grad`` of ``sum(z)`` for ``f_bang(z, y, x): x[:] = 2*y;
  z[:] = sin(x)`` through a closure over a preallocated global ``x``, called twice; each peer
  runs its faithful port (its own ``zeros``, ``sin``, ``sum``) and the error it raises is
  recorded;
- peak memory of the MLP gradient (tracemalloc for ours, autograd and the hand-written
  backprop; see the remarks for PyTorch and JAX).

Eager means no ``jax.jit`` and no ``torch.compile``: every tool runs the Python code as it is.

Run: python benchmarks/bench_reverse.py [--quick]
"""

from __future__ import annotations

# _common first: it sets the thread counts before NumPy starts its pool
from _common import Clock, Figures, agree, at_least, at_most, lorenz_rk4, peak_bytes, peer

import importlib
import sys

import numpy as np

from overdub_ad import grad, hvp, jvp


def rosenbrock_loop(x):
    """Works unchanged on NumPy arrays, autograd boxes, JAX arrays and torch tensors."""
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def make_rosenbrock_vec(xp):
    def rosenbrock_vec(x):
        return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
    return rosenbrock_vec


def rosenbrock_checked(x):
    """The same function with an input check: a branch puts it outside the straight-line
    functions whose hvp is compiled, so this one measures the tape route."""
    if x.ndim != 1:
        raise ValueError("rosenbrock_checked: x must be a vector")
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def make_mlp_loss(xp, x, y):
    def mlp_loss(params):
        h = x
        for w, b in params:
            h = xp.tanh(h @ w + b)
        return 0.5 * xp.sum((h - y) ** 2)
    return mlp_loss


def mlp_backprop(params, x, y):
    """The loss gradient by hand: what a careful NumPy programmer writes."""
    acts = [x]
    h = x
    for w, b in params:
        h = np.tanh(h @ w + b)
        acts.append(h)
    delta = (h - y) * (1.0 - h * h)
    grads = [None] * len(params)
    for k in range(len(params) - 1, -1, -1):
        w, _ = params[k]
        grads[k] = (acts[k].T @ delta, np.sum(delta, axis=0))
        if k:
            delta = (delta @ w.T) * (1.0 - acts[k] * acts[k])
    return grads


def make_challenge_loss(xp, zeros):
    """The mutation challenge, ported to the array module ``xp`` (``zeros(n)`` makes its
    arrays): a loss closing over a preallocated global ``x`` that ``f_bang`` overwrites."""
    def f_bang(z, y, x):
        x[:] = 2 * y
        z[:] = xp.sin(x)

    preallocated = zeros(3)

    def loss(y):
        z = zeros(3)
        f_bang(z, y, preallocated)
        return xp.sum(z)
    return loss


def run_challenge(grad_once, expected, times=2):
    """None if ``grad_once()`` gives the right gradient ``times`` times in a row, else what
    went wrong ("refuses: TypeError", "2nd call fails: RuntimeError", "wrong gradient")."""
    for call in range(times):
        try:
            out = grad_once()
        except Exception as error:  # the peer's refusal is the figure recorded
            name = type(error).__name__
            return f"refuses: {name}" if call == 0 else f"2nd call fails: {name}"
        try:
            agree(out, expected, "mutation challenge")
        except AssertionError:
            return "wrong gradient" if call == 0 else "wrong gradient on the 2nd call"
    return None


def challenge_cell(fig, clock, row, tool, grad_once, expected):
    """The tool's time on the challenge if it gets it right twice, else what went wrong."""
    trouble = run_challenge(grad_once, expected)
    if trouble is None:
        fig.time(row, tool, clock.best(grad_once))
    else:
        fig.note(row, tool, trouble)


def torch_peak_mib(torch, fn):
    """Peak bytes of tensors alive during ``fn()``, above those alive at its start, from
    torch.profiler's memory timeline (tracemalloc cannot see PyTorch's CPU allocator).  The
    timeline is a private PyTorch API: None when it is unavailable."""
    try:
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler._memory_profiler import MemoryProfileTimeline
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                     record_shapes=True, with_stack=True) as prof:
            fn()
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(
            torch.device("cpu"))
    except Exception:  # a private API: the figure is left out, with a remark
        return None
    totals = np.sum(np.asarray(sizes, dtype=float), axis=1)
    return (totals.max() - totals[0]) / 2 ** 20


def main(quick: bool = False) -> Figures:
    clock = Clock(quick)
    n_ros, steps, n_hvp = (5, 3, 100) if quick else (100, 200, 1000)
    width, layers, batch = (32, 2, 8) if quick else (256, 3, 64)
    rng = np.random.default_rng(0)
    x_ros = rng.uniform(-1.0, 1.0, n_ros)
    x_hvp, v_hvp = rng.uniform(-1.0, 1.0, n_hvp), rng.standard_normal(n_hvp)
    params = [(rng.standard_normal((width, width)) / np.sqrt(width), np.zeros(width))
              for _ in range(layers)]
    xb, yb = rng.standard_normal((batch, width)), rng.standard_normal((batch, width))
    y_challenge = np.array([0.3, -1.1, 2.0])
    mlp_loss = make_mlp_loss(np, xb, yb)
    ros_vec = make_rosenbrock_vec(np)
    fig = Figures()

    # -- ours, checked first: the figures below are of right answers ---------------------------
    g_ros = grad(rosenbrock_loop)(x_ros)
    agree(g_ros, grad(ros_vec)(x_ros), "Rosenbrock loop vs vectorised")
    g_lz = grad(lambda x0: lorenz_rk4(x0, steps))(1.0)
    agree(g_lz, jvp(lambda x0: lorenz_rk4(x0, steps), (1.0,), (1.0,))[1], "Lorenz grad vs jvp")
    g_mlp = grad(mlp_loss)(params)
    agree(g_mlp, mlp_backprop(params, xb, yb), "MLP grad vs hand-written backprop")
    hv = hvp(ros_vec, x_hvp, v_hvp)
    eps = 1e-6                  # central difference of the gradient along v
    agree(hv, (grad(ros_vec)(x_hvp + eps * v_hvp) - grad(ros_vec)(x_hvp - eps * v_hvp))
          / (2 * eps), "hvp vs differences of grad", rtol=1e-5, atol=1e-6)
    challenge = make_challenge_loss(np, np.zeros)
    expected = 2 * np.cos(2 * y_challenge)
    assert run_challenge(lambda: grad(challenge)(y_challenge), expected) is None

    ros = f"Rosenbrock n={n_ros}, Python loop: grad"
    lz = f"RK4 Lorenz, {steps} steps, scalar loop: grad"
    mlp = f"MLP {layers}x{width} tanh, batch {batch}: grad"
    hv_row = f"vectorised Rosenbrock n={n_hvp}: hvp"
    ch = "mutation challenge (f_bang, a cache): grad twice"
    fig.workload(ros, clock.best(lambda: rosenbrock_loop(x_ros)), at_most(30))
    fig.workload(lz, clock.best(lambda: lorenz_rk4(1.0, steps)), at_most(30))
    mlp_plain, mlp_ours, mlp_hand = clock.interleaved(
        lambda: mlp_loss(params), lambda: grad(mlp_loss)(params),
        lambda: mlp_backprop(params, xb, yb))
    fig.workload(mlp, mlp_plain)
    fig.workload(hv_row, clock.best(lambda: ros_vec(x_hvp)), at_most(10))
    fig.workload(ch, clock.best(lambda: challenge(y_challenge)))
    fig.time(ros, "overdub", clock.best(lambda: grad(rosenbrock_loop)(x_ros)))
    fig.time(lz, "overdub", clock.best(lambda: grad(lambda x0: lorenz_rk4(x0, steps))(1.0)))
    fig.time(mlp, "overdub", mlp_ours)
    fig.time(mlp, "hand-written NumPy backprop", mlp_hand)
    fig.time(hv_row, "overdub", clock.best(lambda: hvp(ros_vec, x_hvp, v_hvp)))
    agree(hvp(rosenbrock_checked, x_hvp, v_hvp), hv, "hvp: tape route vs compiled")
    hv_tape = f"vectorised Rosenbrock n={n_hvp} with an input check (tape route): hvp"
    fig.workload(hv_tape, clock.best(lambda: rosenbrock_checked(x_hvp)))
    fig.time(hv_tape, "overdub", clock.best(lambda: hvp(rosenbrock_checked, x_hvp, v_hvp)))
    fig.time(ch, "overdub", clock.best(lambda: grad(challenge)(y_challenge)))
    mem = "MLP gradient peak memory, MiB"
    fig.figure(f"{mem}: overdub", peak_bytes(lambda: grad(mlp_loss)(params)) / 2 ** 20, "MiB")
    fig.figure(f"{mem}: hand-written NumPy backprop",
               peak_bytes(lambda: mlp_backprop(params, xb, yb)) / 2 ** 20, "MiB")

    # -- autograd ----------------------------------------------------------------------------------
    ag = peer("autograd")
    if ag is None:
        for row in (ros, lz, mlp, hv_row, ch):
            fig.note(row, "autograd", "not installed")
    else:
        anp = importlib.import_module("autograd.numpy")
        ag_loss = make_mlp_loss(anp, xb, yb)
        ag_ros_vec = make_rosenbrock_vec(anp)
        ag_hvp = ag.hessian_vector_product(ag_ros_vec)
        ag_lz = ag.grad(lambda x0: lorenz_rk4(x0, steps))
        agree(ag.grad(rosenbrock_loop)(x_ros), g_ros, "autograd " + ros)
        agree(ag_lz(1.0), g_lz, "autograd " + lz)
        agree(ag.grad(ag_loss)(params), g_mlp, "autograd " + mlp)
        agree(ag_hvp(x_hvp, v_hvp), hv, "autograd " + hv_row)
        fig.time(ros, "autograd", clock.best(lambda: ag.grad(rosenbrock_loop)(x_ros)))
        fig.time(lz, "autograd", clock.best(lambda: ag_lz(1.0)))
        fig.time(mlp, "autograd", clock.best(lambda: ag.grad(ag_loss)(params)))
        fig.time(hv_row, "autograd", clock.best(lambda: ag_hvp(x_hvp, v_hvp)))
        ag_challenge = ag.grad(make_challenge_loss(anp, anp.zeros))
        challenge_cell(fig, clock, ch, "autograd", lambda: ag_challenge(y_challenge), expected)
        fig.figure(f"{mem}: autograd", peak_bytes(lambda: ag.grad(ag_loss)(params)) / 2 ** 20,
                   "MiB")
        fig.figure("MLP gradient peak memory: ours / autograd's",
                   fig[f"{mem}: overdub"] / fig[f"{mem}: autograd"], "x", at_most(1))

    # -- JAX, eager ------------------------------------------------------------------------------
    jax = peer("jax")
    if jax is None:
        for row in (ros, lz, mlp, hv_row, ch):
            fig.note(row, "jax", "not installed")
    else:
        jnp = jax.numpy
        jx_ros, jx_hvp, jv_hvp = jnp.asarray(x_ros), jnp.asarray(x_hvp), jnp.asarray(v_hvp)
        jparams = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
        j_loss = make_mlp_loss(jnp, jnp.asarray(xb), jnp.asarray(yb))
        j_ros_vec = make_rosenbrock_vec(jnp)
        done = jax.block_until_ready
        runs = {
            ros: (lambda: done(jax.grad(rosenbrock_loop)(jx_ros)), g_ros, clock.slow),
            lz: (lambda: done(jax.grad(lambda x0: lorenz_rk4(x0, steps))(1.0)), g_lz, clock.slow),
            mlp: (lambda: done(jax.grad(j_loss)(jparams)), g_mlp, clock.best),
            hv_row: (lambda: done(jax.jvp(jax.grad(j_ros_vec), (jx_hvp,), (jv_hvp,))[1]), hv,
                     clock.best),
        }
        for row, (run, ours, timer) in runs.items():
            agree(run(), ours, "jax " + row)
            fig.time(row, "jax", timer(run))
        j_challenge = jax.grad(make_challenge_loss(jnp, jnp.zeros))
        challenge_cell(fig, clock, ch, "jax", lambda: j_challenge(jnp.asarray(y_challenge)),
                       expected)
        fig.remarks.append("JAX's peak memory is not measured: XLA's CPU buffers are invisible "
                           "to tracemalloc, and JAX reports no memory statistics on CPU.")

    # -- PyTorch, eager ----------------------------------------------------------------------------
    torch = peer("torch")
    if torch is None:
        for row in (ros, lz, mlp, hv_row, ch):
            fig.note(row, "torch", "not installed")
    else:
        tparams = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
                   for w, b in params]
        t_loss = make_mlp_loss(torch, torch.tensor(xb), torch.tensor(yb))
        t_ros_vec = make_rosenbrock_vec(torch)

        def leaf(value):
            return torch.tensor(value, dtype=torch.float64, requires_grad=True)

        def t_ros():
            x = leaf(x_ros)
            return torch.autograd.grad(rosenbrock_loop(x), x)[0]

        def t_lz():
            x0 = leaf(1.0)
            return torch.autograd.grad(lorenz_rk4(x0, steps), x0)[0]

        def t_mlp():
            grads = torch.autograd.grad(t_loss(tparams), [p for pair in tparams for p in pair])
            return [grads[k:k + 2] for k in range(0, len(grads), 2)]

        def t_hvp():
            x = leaf(x_hvp)
            (g,) = torch.autograd.grad(t_ros_vec(x), x, create_graph=True)
            return torch.autograd.grad(g, x, torch.tensor(v_hvp))[0]

        for row, run in ((ros, t_ros), (lz, t_lz), (mlp, t_mlp), (hv_row, t_hvp)):
            agree(run(), {ros: g_ros, lz: g_lz, mlp: g_mlp, hv_row: hv}[row], "torch " + row)
            fig.time(row, "torch", clock.best(run))

        def zeros(n):
            return torch.zeros(n, dtype=torch.float64)

        func_loss = make_challenge_loss(torch, zeros)
        eager_loss = make_challenge_loss(torch, zeros)

        def t_eager_challenge():
            y = leaf(y_challenge)
            eager_loss(y).backward()
            return y.grad

        # torch.func.grad and eager PyTorch fail differently: the cell names both, or times
        # the eager run should both succeed
        functional = run_challenge(lambda: torch.func.grad(func_loss)(torch.tensor(y_challenge)),
                                   expected)
        eager = run_challenge(t_eager_challenge, expected)
        if functional is None and eager is None:
            fig.time(ch, "torch", clock.best(t_eager_challenge))
        else:
            fig.note(ch, "torch", f"torch.func.grad {functional or 'works'}; eager "
                                  f"{eager or 'works'}")
        peak = torch_peak_mib(torch, t_mlp)
        if peak is not None:
            fig.figure(f"{mem}: torch (profiler's tensor memory)", peak, "MiB")
        fig.remarks.append(
            "PyTorch's peak memory is the peak of its tensors' bytes above those alive at the "
            "start of the call, from torch.profiler's memory timeline (PyTorch allocates outside "
            "tracemalloc's view); ours, autograd's and the hand-written backprop's are "
            "tracemalloc's peak of the call's allocations.  Close in meaning, not identical.")

    # -- the targets relative to peers ---------------------------------------------------
    for row in (ros, lz):
        peer_times = {tool: fig.times[row, tool] for tool in ("autograd", "jax", "torch")
                      if (row, tool) in fig.times}
        if peer_times:
            fastest = min(peer_times, key=peer_times.get)
            fig.figure(f"{row}: fastest peer's ({fastest}) time / ours",
                       peer_times[fastest] / fig.times[row, "overdub"], "x", at_least(5))
        if "autograd" in peer_times:
            fig.figure(f"{row}: autograd's time / ours",
                       peer_times["autograd"] / fig.times[row, "overdub"], "x", at_least(10))
    fig.figure("MLP grad: ours / hand-written NumPy backprop",
               fig.times[mlp, "overdub"] / fig.times[mlp, "hand-written NumPy backprop"], "x",
               at_most(1.15))
    for tool in ("autograd", "jax", "torch"):
        if (mlp, tool) in fig.times:
            fig.figure(f"MLP grad: {tool}'s time / ours", fig.times[mlp, tool]
                       / fig.times[mlp, "overdub"], "x", at_least(1) if tool != "torch" else None)
    return fig


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    for label, value in main("--quick" in sys.argv).items():
        print(f"{value:12.2f}  {label}")
