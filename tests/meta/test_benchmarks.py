"""The benchmarks run: every ``benchmarks/bench_*.py`` module's ``main(quick=True)`` returns
finite, positive figures, each installed peer (autograd, JAX, PyTorch) has a time or a recorded
refusal wherever a workload is ported to it, and ``run.py`` turns the figures into the page and
the plot.  Quick mode runs every workload (each checked against ours inside the module) at
small sizes, so the test is a smoke run, not a measurement."""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys

import pytest

from tests.conftest import ROOT

BENCH = ROOT / "benchmarks"
MODULES = sorted(path.stem for path in BENCH.glob("bench_*.py"))
PEERS = ("autograd", "jax", "torch")
_RESULTS: dict = {}


def _import(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def _bench(name: str):
    """The module and its quick figures, run once per test session."""
    if name not in _RESULTS:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
        module = _import(name)
        _RESULTS[name] = module, module.main(quick=True)
    return _RESULTS[name]


@pytest.mark.parametrize("name", MODULES)
def test_quick_run_gives_finite_positive_figures(name):
    module, fig = _bench(name)
    assert fig, f"{name}.main returned no figures"
    differences = getattr(module, "DIFFERENCES", ())  # (finite is what they must be)
    bad = {label: value for label, value in fig.items()
           if not (isinstance(value, float) and math.isfinite(value)
                   and (value > 0 or label in differences))}
    assert not bad, f"{name}: figures that are not finite positive numbers: {bad}"
    for workload in fig.plain:
        assert (workload, "overdub") in fig.times, f"{name}: no overdub time for {workload!r}"


@pytest.mark.parametrize("name", ["bench_forward", "bench_reverse"])
def test_every_peer_has_a_time_or_a_note_where_ported(name):
    _, fig = _bench(name)
    cells = {**{key: "time" for key in fig.times}, **fig.notes}
    ported = [w for w in fig.plain if any((w, p) in cells for p in PEERS)]
    assert ported, f"{name}: no workload is ported to any peer"
    for peer in PEERS:
        installed = importlib.util.find_spec(peer) is not None
        for workload in ported:
            cell = cells.get((workload, peer))
            assert cell is not None, f"{name}: {peer} has nothing for {workload!r}"
            assert (cell == "not installed") is not installed, (name, peer, workload, cell)


def test_mutation_challenge_records_what_each_installed_peer_does():
    _, fig = _bench("bench_reverse")
    (row,) = [w for w in fig.plain if w.startswith("mutation challenge")]
    for peer in PEERS:
        if importlib.util.find_spec(peer) is None:
            continue
        note = fig.notes.get((row, peer))
        # a peer that gets it right twice is timed; one that does not says how it failed
        assert (row, peer) in fig.times or any(word in note for word in ("refuses", "fails",
                                                                         "wrong")), note


def test_run_writes_a_page_with_every_workload_and_a_png(tmp_path):
    run = _import("run")
    results = []
    for name in MODULES:
        module, fig = _bench(name)
        results.append((f"{name}.py", "title", module.__doc__ or "", fig))
    text = run.page(results, 60.0, (1.0, 1.0))
    for _, _, _, fig in results:
        for workload in fig.plain:
            assert workload.replace("|", "\\|") in text
    assert "![" in text and run.PLOT.name in text
    pytest.importorskip("matplotlib")
    png = tmp_path / "plot.png"
    run.plot(results, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
