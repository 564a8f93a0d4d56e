"""Automatic differentiation: derivative time / plain time, measured in one process.

Workloads (issue #5):
- Rosenbrock over n=100 in a Python loop (scalar indexing and arithmetic): ``grad``;
- RK4 integration of the Lorenz system, 200 steps, scalar Python loop: ``grad`` and ``jvp``;
- an MLP, 3 layers of 256 tanh units, batch 64: ``grad`` of the squared-error loss, against the
  forward pass and against a hand-written NumPy backprop in this file;
- ``hvp`` of the vectorised Rosenbrock function, n=1000 (forward-over-reverse);
- peak memory of the MLP gradient (tracemalloc), against the hand-written backprop.

The same workloads run with HIPS autograd, JAX and PyTorch when they are importable (they are
optional: nothing is installed for this), so the ratios can be compared on one machine.

Run: python benchmarks/bench_ad.py
"""

from __future__ import annotations

import gc
import importlib
import platform
import sys
import time
import tracemalloc

import numpy as np

from overdub_ad import grad, hvp, jvp

# -- workloads (plain NumPy / Python) -----------------------------------------------------------


def rosenbrock_loop(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def rosenbrock_vec(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def lorenz(x, y, z):
    return 10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z


def lorenz_rk4(x0, steps=200, h=0.01):
    x, y, z = x0, 1.0, 1.0
    for _ in range(steps):
        k1 = lorenz(x, y, z)
        k2 = lorenz(x + h / 2 * k1[0], y + h / 2 * k1[1], z + h / 2 * k1[2])
        k3 = lorenz(x + h / 2 * k2[0], y + h / 2 * k2[1], z + h / 2 * k2[2])
        k4 = lorenz(x + h * k3[0], y + h * k3[1], z + h * k3[2])
        x = x + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        y = y + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        z = z + h / 6 * (k1[2] + 2 * k2[2] + 2 * k3[2] + k4[2])
    return x + y + z


def mlp_loss(params, x, y):
    h = x
    for w, b in params:
        h = np.tanh(h @ w + b)
    return 0.5 * np.sum((h - y) ** 2)


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


def mlp_setup(width=256, layers=3, batch=64, seed=0):
    rng = np.random.default_rng(seed)
    params = [(rng.standard_normal((width, width)) / np.sqrt(width), np.zeros(width))
              for _ in range(layers)]
    return params, rng.standard_normal((batch, width)), rng.standard_normal((batch, width))


# -- measuring -------------------------------------------------------------------------------------

def best_of(fn, repeat=5, min_time=0.2):
    """Best time of ``repeat`` runs (more runs for fast functions)."""
    fn()  # warm up (rewriting, caches)
    times = []
    start = time.perf_counter()
    while len(times) < repeat or (time.perf_counter() - start < min_time and len(times) < 200):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def peak_bytes(fn):
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- other libraries, when importable ------------------------------------------------------------

def _import(name):
    try:
        return importlib.import_module(name)
    except Exception:  # not installed, or broken: skipped
        return None


def other_libraries(x100, x1000, v1000, params, xb, yb):
    """{library: {workload: seconds}} for the libraries that can be imported."""
    results = {}
    ag = _import("autograd")
    if ag is not None:
        anp = importlib.import_module("autograd.numpy")

        def ros(x):
            s = 0.0
            for i in range(len(x) - 1):
                s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
            return s

        def loss(ps):
            h = xb
            for w, b in ps:
                h = anp.tanh(h @ w + b)
            return 0.5 * anp.sum((h - yb) ** 2)

        def ros_vec(x):
            return anp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

        ag_hvp = ag.make_hvp(ros_vec)
        results["autograd"] = {
            "rosenbrock": best_of(lambda: ag.grad(ros)(x100)),
            "lorenz": best_of(lambda: ag.grad(lorenz_rk4)(1.0)),
            "mlp": best_of(lambda: ag.grad(loss)(params)),
            "hvp": best_of(lambda: ag_hvp(x1000)[0](v1000)),
        }
    jax = _import("jax")
    if jax is not None:
        jnp = importlib.import_module("jax.numpy")
        jax.config.update("jax_enable_x64", True)

        def ros_jax(x):
            s = 0.0
            for i in range(len(x) - 1):
                s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
            return s

        def loss_jax(ps):
            h = jnp.asarray(xb)
            for w, b in ps:
                h = jnp.tanh(h @ w + b)
            return 0.5 * jnp.sum((h - yb) ** 2)

        def ros_vec_jax(x):
            return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

        jparams = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
        jx100, jx1000, jv1000 = jnp.asarray(x100), jnp.asarray(x1000), jnp.asarray(v1000)
        hvp_fn = jax.jit(lambda x, v: jax.jvp(jax.grad(ros_vec_jax), (x,), (v,))[1])
        results["jax (eager grad; hvp jitted)"] = {
            "rosenbrock": best_of(lambda: jax.grad(ros_jax)(jx100).block_until_ready(), repeat=2),
            "lorenz": best_of(lambda: jax.grad(lorenz_rk4)(1.0).block_until_ready(), repeat=2),
            "mlp": best_of(lambda: jax.block_until_ready(jax.grad(loss_jax)(jparams))),
            "hvp": best_of(lambda: hvp_fn(jx1000, jv1000).block_until_ready()),
        }
    torch = _import("torch")
    if torch is not None:
        def ros_t():
            x = torch.tensor(x100, requires_grad=True)
            s = 0.0
            for i in range(len(x) - 1):
                s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
            s.backward()
            return x.grad

        def lorenz_t():
            x0 = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
            lorenz_rk4(x0).backward()
            return x0.grad

        tparams = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
                   for w, b in params]
        txb, tyb = torch.tensor(xb), torch.tensor(yb)

        def mlp_t():
            h = txb
            for w, b in tparams:
                h = torch.tanh(h @ w + b)
            loss = 0.5 * torch.sum((h - tyb) ** 2)
            return torch.autograd.grad(loss, [p for pair in tparams for p in pair])

        def hvp_t():
            x = torch.tensor(x1000, requires_grad=True)
            f = torch.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
            (g,) = torch.autograd.grad(f, x, create_graph=True)
            return torch.autograd.grad(g, x, torch.tensor(v1000))[0]

        results["pytorch"] = {"rosenbrock": best_of(ros_t), "lorenz": best_of(lorenz_t),
                              "mlp": best_of(mlp_t), "hvp": best_of(hvp_t)}
    return results


# -- the table -------------------------------------------------------------------------------------

def main() -> dict[str, float]:
    rng = np.random.default_rng(0)
    x100 = rng.uniform(-1.0, 1.0, 100)
    x1000 = rng.uniform(-1.0, 1.0, 1000)
    v1000 = rng.standard_normal(1000)
    params, xb, yb = mlp_setup()

    # correctness first: the figures below are of right answers
    g_ros = grad(rosenbrock_loop)(x100)
    assert np.allclose(g_ros, grad(rosenbrock_vec)(x100), rtol=1e-12)
    g_mlp = grad(mlp_loss)(params, xb, yb)
    for (gw, gb), (hw, hb) in zip(g_mlp, mlp_backprop(params, xb, yb)):
        assert np.allclose(gw, hw) and np.allclose(gb, hb)
    assert np.isclose(grad(lorenz_rk4)(1.0), jvp(lorenz_rk4, (1.0,), (1.0,))[1], rtol=1e-10)

    plain = {
        "rosenbrock": best_of(lambda: rosenbrock_loop(x100)),
        "lorenz": best_of(lambda: lorenz_rk4(1.0)),
        "mlp": best_of(lambda: mlp_loss(params, xb, yb)),
        "hvp": best_of(lambda: rosenbrock_vec(x1000)),
    }
    ours = {
        "rosenbrock": best_of(lambda: grad(rosenbrock_loop)(x100)),
        "lorenz": best_of(lambda: grad(lorenz_rk4)(1.0)),
        "mlp": best_of(lambda: grad(mlp_loss)(params, xb, yb)),
        "hvp": best_of(lambda: hvp(rosenbrock_vec, x1000, v1000)),
    }
    lorenz_jvp = best_of(lambda: jvp(lorenz_rk4, (1.0,), (1.0,)))
    backprop = best_of(lambda: mlp_backprop(params, xb, yb))
    mem_ours = peak_bytes(lambda: grad(mlp_loss)(params, xb, yb))
    mem_hand = peak_bytes(lambda: mlp_backprop(params, xb, yb))
    mem_plain = peak_bytes(lambda: mlp_loss(params, xb, yb))

    results = {
        "Rosenbrock n=100, Python loop: grad / plain": ours["rosenbrock"] / plain["rosenbrock"],
        "RK4 Lorenz 200 steps, scalar loop: grad / plain (target <= 30)":
            ours["lorenz"] / plain["lorenz"],
        "RK4 Lorenz 200 steps, scalar loop: jvp / plain (target <= 15)":
            lorenz_jvp / plain["lorenz"],
        "MLP 3x256 tanh, batch 64: grad / forward": ours["mlp"] / plain["mlp"],
        "MLP 3x256 tanh, batch 64: grad / hand-written NumPy backprop": ours["mlp"] / backprop,
        "MLP: hand-written backprop / forward": backprop / plain["mlp"],
        "vectorised Rosenbrock n=1000: hvp / plain": ours["hvp"] / plain["hvp"],
        "MLP gradient peak memory, MiB": mem_ours / 2 ** 20,
        "MLP gradient peak memory / hand-written backprop's": mem_ours / mem_hand,
        "MLP forward peak memory, MiB": mem_plain / 2 ** 20,
    }
    others = other_libraries(x100, x1000, v1000, params, xb, yb)
    for library, times in others.items():
        for workload, seconds in times.items():
            results[f"{library}: {workload} / plain"] = seconds / plain[workload]

    print(f"Python {platform.python_version()}, NumPy {np.__version__} on "
          f"{platform.machine()} ({platform.processor() or 'cpu'})")
    print(f"{'workload':<40} {'plain':>10} {'overdub_ad':>11} {'ratio':>8}")
    rows = [("Rosenbrock n=100 loop, grad", "rosenbrock", ours["rosenbrock"]),
            ("RK4 Lorenz 200 steps, grad", "lorenz", ours["lorenz"]),
            ("RK4 Lorenz 200 steps, jvp", "lorenz", lorenz_jvp),
            ("MLP 3x256 tanh b64, grad", "mlp", ours["mlp"]),
            ("MLP, hand-written backprop", "mlp", backprop),
            ("Rosenbrock n=1000 vectorised, hvp", "hvp", ours["hvp"])]
    for label, key, seconds in rows:
        print(f"{label:<40} {plain[key] * 1e3:>8.3f}ms {seconds * 1e3:>9.3f}ms "
              f"{seconds / plain[key]:>7.1f}x")
    print(f"{'MLP grad / hand-written backprop':<40} {'':>10} {'':>11} "
          f"{ours['mlp'] / backprop:>7.2f}x")
    print(f"{'MLP peak memory: grad, backprop, fwd':<40} {mem_ours / 2 ** 20:>8.2f}MiB "
          f"{mem_hand / 2 ** 20:>7.2f}MiB {mem_plain / 2 ** 20:>6.2f}MiB")
    if others:
        print("other libraries (ratio to the same plain time):")
        for library, times in others.items():
            print("  " + library + ": " + ", ".join(f"{k} {v / plain[k]:.1f}x"
                                                     for k, v in times.items()))
    else:
        print("other libraries: autograd, jax, torch not importable -- skipped")
    return results


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
