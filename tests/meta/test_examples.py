"""Every script in examples/ runs to completion as a user would run it, and prints what it
promises; the examples' own functions also hold on inputs their scripts do not try."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.conftest import ROOT

SCRIPTS = sorted((ROOT / "examples").glob("*.py"))

# Lines (stripped) that a script's output must contain; scripts not listed must just exit 0.
EXPECTED = {
    "quickstart.py": [
        "wave(1.0)",
        "math.sin(1.0)",
        "operator.mul(2.0, 0.8414709848078965)",
        "str      called 10 times",
        "-> the 10 str calls happen inside C's map, and are seen",
        "f(1, 2, 3)",
        "operator.mul(1, 2)",
        "operator.mul(2, 3)",
        "operator.add(2, 6)",
        "overdub(Degrees(), wave, 30.0) = 16.000000  (sin(30 deg) = 0.5)",
        "wave(30.0)                     = 13.023937  (sin(30 rad), untouched)",
        "D(x * D(y -> x*y)(3))(5)       = 10.0",
        "D(wave)(1.0)                   = 1.580605  (2 cos 1 + 1/2)",
        "grad(loss)(ones(3))            = [0.31985 0.31985 0.31985]",
    ],
    "trace_stdlib.py": [
        "textwrap.TextWrapper._split('The quick brown fox jumps over the lazy dog')",
        "textwrap.TextWrapper(width=15)",
        "200  statistics._exact_ratio",
    ],
    "ode_fit.py": ["fitted k = 4.002, c = 0.499   (true k = 4.0, c = 0.5)"],
    "lagrangian_hessian.py": ["[[6.75       1.36078836]", "[1.36078836 2.        ]]"],
    "dask_backend.py": ["column norms: all 1, as NumPy computes them",
                        "grad(energy): equal to the gradient NumPy computes",
                        "softplus over 200001 points in 7 chunks: 30.0 at x=30",
                        "every worker is a process of its own"],
}

# What a script needs beyond the run-time dependencies: without it, its test is skipped.
NEEDS = {"ode_fit.py": "scipy", "dask_backend.py": "distributed"}


def test_examples_exist() -> None:
    names = {script.name for script in SCRIPTS}
    assert {"quickstart.py", "hmlstm_broadcast.py", "trace_stdlib.py", "ode_fit.py",
            "lagrangian_hessian.py"} <= names
    assert set(EXPECTED) | set(NEEDS) <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.name)
def test_example_runs(script: Path, child_env: dict[str, str]) -> None:
    if script.name in NEEDS:
        pytest.importorskip(NEEDS[script.name])
    # As a user runs it, from the checkout's root, with the same overdub as this test run.
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=child_env,
                          capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout}\n{done.stderr}"
    lines = {line.strip() for line in done.stdout.splitlines()}
    missing = [line for line in EXPECTED.get(script.name, []) if line not in lines]
    assert not missing, f"{script.name} did not print {missing}; it printed:\n{done.stdout}"
    # The quickstart's promise: it fits on one screen.
    if script.name == "quickstart.py":
        assert len(done.stdout.splitlines()) <= 40
        # and its last demo runs the NumPy loss on the GPU, or says why not and uses the CPU
        backend = [line for line in lines if line.startswith("loss(ones(3)) on ")]
        assert backend in (["loss(ones(3)) on the GPU (CuPy) = 0.870038  (plain NumPy: 0.870038)"],
                           ["loss(ones(3)) on the CPU (NumPy) = 0.870038  (plain NumPy: 0.870038)"])
        assert ("the CPU" in backend[0]) == any(line.startswith("no GPU here (") for line in lines)


# -- the examples' own functions, checked in this process on inputs their main() does not use --

def _example(name: str) -> ModuleType:
    """Import examples/<name>.py as a module (its main() does not run)."""
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_ode_fit_gradient_matches_finite_differences(rng: np.random.Generator) -> None:
    pytest.importorskip("scipy")
    from overdub_ad import grad
    ode = _example("ode_fit")
    for params in rng.uniform([2.0, 0.1], [6.0, 1.5], (3, 2)):
        exact = grad(ode.loss)(params)
        assert np.allclose(exact, ode.central_differences(ode.loss, params), rtol=1e-6,
                           atol=1e-10)
        assert np.linalg.norm(exact) > 1e-3          # away from the optimum: a real gradient


def test_lagrangian_hessian_is_the_mass_matrix_and_gives_the_motion(
        rng: np.random.Generator) -> None:
    lag = _example("lagrangian_hessian")
    for _ in range(4):
        q, qdot = rng.uniform(-3, 3, 2), rng.normal(0, 3, 2)
        assert np.allclose(lag.mass_matrix(q, qdot), lag.textbook_mass_matrix(q), rtol=1e-12)
        assert np.allclose(lag.acceleration(q, qdot), lag.textbook_acceleration(q, qdot),
                           rtol=1e-9, atol=1e-12)
        assert abs(lag.energy(q, qdot) - lag.textbook_energy(q, qdot)) < 1e-9


def test_trace_stdlib_outline_holds_for_other_widths() -> None:
    traced = _example("trace_stdlib")
    import statistics
    import textwrap
    for width in (8, 30, 80):
        tracer, wrapped = traced.trace_fill(width)
        assert wrapped == textwrap.fill(traced.TEXT, width=width)
        assert traced.outline(tracer.render(modules=["textwrap"])) == traced.FILL_OUTLINE
    counter = traced.count_mean([1.5, 2.0, 7.25])
    assert counter.counts[statistics._exact_ratio] == 3


def test_hmlstm_broadcast_matches_its_loop_on_every_branch() -> None:
    from overdub_gpu import ArrayBackendContext, broadcast
    hm = _example("hmlstm_broadcast")
    z, zb, c, f, i, g = data = hm.inputs(12, seed=3)
    branches = {(float(a), float(b)) for a, b in zip(z[:, 0], zb[:, 0])}
    assert {(1.0, 0.0), (1.0, 1.0), (0.0, 0.0), (0.0, 1.0)} <= branches  # flush, copy, update
    out = broadcast(ArrayBackendContext(np), hm.hmlstm, *data)
    assert np.allclose(out, hm.per_element(*data), rtol=0, atol=1e-14)
    copy = (z[:, 0] == 0) & (zb[:, 0] == 0)
    assert np.array_equal(out[copy], c[copy])


def test_dask_backend_computes_on_separate_worker_processes() -> None:
    # The example's code and gradient on a cluster this test starts: every task the results
    # needed ran on a worker of that cluster, each worker a process other than this one.
    distributed = pytest.importorskip("distributed")
    import dask
    import dask.array as da
    dask_example = _example("dask_backend")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client, \
            dask.config.set({"array.chunk-size": "128KiB"}):
        tasks, workers = dask_example.run_on(client, da)
        cluster_workers = set(client.scheduler_info()["workers"])
        assert tasks > 50 and workers and workers <= cluster_workers
        pids = client.run(os.getpid)
        assert set(pids) == cluster_workers
        assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
