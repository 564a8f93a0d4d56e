"""What every ``bench_*.py`` module shares: the figures it returns, timing, and the peers.

A bench module's ``main(quick=False)`` returns a :class:`Figures`, a ``dict[str, float]`` of
label -> figure that also remembers how ``run.py`` lays the figures out: *rows* (one workload,
its plain time, and each tool's time as a ratio to it) and *single figures* (a unit, maybe a
target).  Peers (HIPS autograd, JAX, PyTorch) are optional: a peer that is not installed gets a
note in its cell instead of a time, and nothing fails.
"""

from __future__ import annotations

import gc
import importlib
import importlib.metadata
import os
import pathlib
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

#: One thread per library, set before NumPy, PyTorch or XLA start their thread pools (so import
#: this module first).  With several pools in one process on a small or busy machine, a threaded
#: matmul waits for threads another library's pool keeps busy: NumPy's 64x256 @ 256x256 took
#: 45 ms instead of 0.5 ms next to PyTorch's pool on two loaded cores, and the ratios measured the
#: scheduler.  Single-threaded, they compare the work each tool does.  Set the variables before
#: running to override.
THREADS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
for _name, _value in THREADS.items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402  (after the thread settings)

# The benchmarks measure the checkout they sit in, installed or not.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

#: The peers, by the name of the module that provides them, in the table's column order.
PEERS = ("autograd", "jax", "torch")
#: The tools a row can hold a time for: ours, then the peers; any other tool name in a row is
#: that row's reference (hand-written NumPy, cProfile, np.vectorize).
TOOLS = ("overdub",) + PEERS


@dataclass(frozen=True)
class Target:
    """An issue's target for a figure: ``value op bound`` (``op`` is ``"<="`` or ``">="``)."""

    op: str
    bound: float

    def met(self, value: float) -> bool:
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}"


def at_most(bound: float) -> Target:
    return Target("<=", bound)


def at_least(bound: float) -> Target:
    return Target(">=", bound)


class Figures(dict):
    """label -> figure (``"workload | tool"`` -> time / plain time for rows, the label itself
    for single figures), plus the layout ``run.py`` needs.

    Attributes: ``plain`` (workload -> plain seconds), ``times`` ((workload, tool) -> seconds),
    ``notes`` ((workload, tool) -> why there is no time: "not installed", "refuses: TypeError"),
    ``targets`` (workload or single figure -> :class:`Target`; a row's target is on overdub's
    ratio), ``units`` (single figure -> unit).  All are filled by the bench module's ``main``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.plain: dict[str, float] = {}
        self.times: dict[tuple[str, str], float] = {}
        self.notes: dict[tuple[str, str], str] = {}
        self.targets: dict[str, Target] = {}
        self.units: dict[str, str] = {}
        self.remarks: list[str] = []

    def workload(self, name: str, plain_s: float, target: Target | None = None) -> None:
        self.plain[name] = plain_s
        if target is not None:
            self.targets[name] = target

    def time(self, workload: str, tool: str, seconds: float) -> None:
        self.times[workload, tool] = seconds
        self[f"{workload} | {tool}"] = seconds / self.plain[workload]

    def note(self, workload: str, tool: str, text: str) -> None:
        self.notes[workload, tool] = text

    def ratio(self, workload: str, tool: str) -> float | None:
        seconds = self.times.get((workload, tool))
        return None if seconds is None else seconds / self.plain[workload]

    def figure(self, label: str, value: float, unit: str = "x",
               target: Target | None = None) -> None:
        self[label] = value
        self.units[label] = unit
        if target is not None:
            self.targets[label] = target


class Clock:
    """Best-of-several timing; ``quick`` runs each function once after its warm-up call."""

    def __init__(self, quick: bool) -> None:
        self.quick = quick

    def best(self, fn: Callable[[], Any], repeat: int = 5, min_time: float = 0.2) -> float:
        """The fastest of ``repeat`` runs after a warm-up run (rewriting, caches, kernel
        compilation), with more runs for fast functions until ``min_time`` has passed: the
        minimum is the figure least disturbed by other load on the machine.  Quick: one run,
        no warm-up (a smoke test of the workload, not a measurement)."""
        if self.quick:
            repeat, min_time = 1, 0.0
        else:
            fn()
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < repeat or (time.perf_counter() - start < min_time and len(times) < 200):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    def interleaved(self, *fns: Callable[[], Any], repeat: int = 5,
                    min_time: float = 0.5) -> list[float]:
        """The best time of each of ``fns``, measured in turns (one call of each, again and
        again): for a ratio of two close times, which measuring one after the other would
        let a change in the machine's state (other load, clock speed) skew."""
        if self.quick:
            return [self.best(fn) for fn in fns]
        for fn in fns:
            fn()
        times: list[list[float]] = [[] for _ in fns]
        start = time.perf_counter()
        while len(times[0]) < repeat or (time.perf_counter() - start < min_time and
                                         len(times[0]) < 200):
            for fn, kept in zip(fns, times):
                t = time.perf_counter()
                fn()
                kept.append(time.perf_counter() - t)
        return [min(kept) for kept in times]

    def slow(self, fn: Callable[[], Any]) -> float:
        """For peers that take a second or more a call (eager JAX on scalar loops)."""
        return self.best(fn, repeat=2, min_time=0.0)


def lorenz(x: Any, y: Any, z: Any) -> tuple[Any, Any, Any]:
    return 10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z


def lorenz_rk4(x0: Any, steps: int = 200, h: float = 0.01) -> Any:
    """Works unchanged on floats, autograd boxes, JAX arrays and torch tensors."""
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


def peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak memory allocated through Python's and NumPy's allocators while ``fn`` runs
    (tracemalloc; blind to allocators that bypass them, such as PyTorch's and XLA's)."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def peer(name: str) -> ModuleType | None:
    """The peer's module, or None when it is not installed (or fails to import)."""
    try:
        module = importlib.import_module(name)
    except Exception:  # not installed or broken: the peer is skipped with a note
        return None
    if name == "jax":
        module.config.update("jax_enable_x64", True)  # float64, as NumPy and the others
    return module


def peer_versions() -> dict[str, str | None]:
    """{peer: installed version, or None}."""
    versions: dict[str, str | None] = {}
    for name in PEERS:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def agree(peer_out: Any, ours: Any, what: str, rtol: float = 1e-9, atol: float = 1e-12) -> None:
    """Assert that a peer's result equals ours to tolerance, so a broken port of a workload
    fails loudly instead of timing something else.  Pytrees of lists/tuples are compared leaf
    by leaf; tensors and JAX arrays are converted with ``np.asarray``."""
    if isinstance(ours, (list, tuple)):
        assert len(peer_out) == len(ours), f"{what}: {len(peer_out)} results, expected {len(ours)}"
        for p, o in zip(peer_out, ours):
            agree(p, o, what, rtol, atol)
        return
    if hasattr(peer_out, "detach"):      # a torch tensor
        peer_out = peer_out.detach().numpy()
    np.testing.assert_allclose(np.asarray(peer_out, dtype=float), np.asarray(ours, dtype=float),
                               rtol=rtol, atol=atol, err_msg=what)
