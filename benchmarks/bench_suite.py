"""A third-party test suite under a context whose hooks do nothing: cold and warm, against plain.

The suite is toolz's own (``toolz.tests``, shipped with the package; toolz comes with the dask
extra): each of its test functions that takes no argument, called once, in a fresh process per
run, timed from the first test to the last (imports excluded: the same in every mode):

- plain;
- each test run as ``overdub(ctx, test)`` with ``ctx`` a Context whose prehook does nothing
  (every call and operator intercepted), with an empty on-disk rewrite cache: *cold*, every
  function rewritten on its first call;
- the same again with the cache the cold run left: *warm*, what a second run pays
  (target, issue #16: at most 2x plain).

The number of tests that pass is checked to be the same in every mode (transparency).

Run: python benchmarks/bench_suite.py [--quick]
"""

from __future__ import annotations

# _common first: it sets the thread counts before NumPy starts its pool
from _common import Figures, at_most

import os
import pathlib
import subprocess
import sys
import tempfile

RUNNER = '''
import importlib, inspect, pkgutil, sys, time
import toolz.tests
from overdub import Context, overdub


class DoNothing(Context):
    def prehook(self, fn, /, *args, **kwargs):
        pass


tests = []
for info in sorted(pkgutil.iter_modules(toolz.tests.__path__), key=lambda i: i.name):
    if info.name.startswith("test_"):
        module = importlib.import_module("toolz.tests." + info.name)
        tests += [f for name, f in sorted(vars(module).items()) if name.startswith("test_")
                  and inspect.isfunction(f) and not inspect.signature(f).parameters]
ctx = DoNothing()
passed = 0
start = time.perf_counter()
for test in tests:
    try:
        test() if sys.argv[1] == "plain" else overdub(ctx, test)
        passed += 1
    except Exception:
        pass
print(time.perf_counter() - start, passed, len(tests))
'''


def _run(mode: str, cache: str) -> tuple[float, int, int]:
    env = dict(os.environ, OVERDUB_CACHE_DIR=cache)
    env.pop("OVERDUB_CACHE", None)
    root = pathlib.Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", RUNNER, mode], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, check=True)
    seconds, passed, total = done.stdout.split()
    return float(seconds), int(passed), int(total)


def main(quick: bool = False) -> Figures:
    fig = Figures()
    try:
        import toolz.tests  # noqa: F401
    except ImportError:
        fig.note("toolz test suite", "overdub", "toolz is not installed (the dask extra)")
        return fig
    repeats = 1 if quick else 3
    times: dict[str, list[float]] = {"plain": [], "cold": [], "warm": []}
    counts = set()
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            for mode in ("plain", "cold", "warm"):
                seconds, passed, total = _run("plain" if mode == "plain" else "context", cache)
                times[mode].append(seconds)
                counts.add((passed, total))
    assert len(counts) == 1, f"the suite passes differently under the context: {counts}"
    passed, total = counts.pop()
    plain = min(times["plain"])
    cold = f"toolz's tests ({passed} of {total} pass in every mode): cold cache"
    warm = f"toolz's tests ({passed} of {total} pass in every mode): warm cache"
    fig.workload(cold, plain)
    fig.workload(warm, plain, at_most(2))
    fig.time(cold, "overdub", min(times["cold"]))
    fig.time(warm, "overdub", min(times["warm"]))
    return fig


if __name__ == "__main__":
    for label, value in main("--quick" in sys.argv).items():
        print(f"{value:10.2f}  {label}")
