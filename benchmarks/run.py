"""Run every benchmark in one process and write docs/benchmarks.md.

Each ``benchmarks/bench_*.py`` module has ``main() -> dict[str, float]`` (label -> figure; the
label says what the figure is and the target, if any).  Run: ``python benchmarks/run.py``
(``--no-write`` to print only).
"""

from __future__ import annotations

import datetime
import importlib
import pathlib
import platform
import sys

HERE = pathlib.Path(__file__).resolve().parent
DOC = HERE.parent / "docs" / "benchmarks.md"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy
    cores = len(getattr(__import__("os"), "sched_getaffinity", lambda _: [0])(0))
    return (f"{cpu}, {cores} cores; CPython {platform.python_version()}, NumPy "
            f"{numpy.__version__}; {platform.system()} {platform.release()}")


def main() -> None:
    sys.path.insert(0, str(HERE))
    sys.setrecursionlimit(10000)
    sections = []
    for path in sorted(HERE.glob("bench_*.py")):
        module = importlib.import_module(path.stem)
        print(f"== {path.name}", flush=True)
        results = module.main()
        sections.append((path.name, (module.__doc__ or "").strip().splitlines()[0], results))
    if "--no-write" in sys.argv:
        return
    lines = ["# Benchmarks", "",
             "Figures from `python benchmarks/run.py` (every ratio measured in one process, best "
             "of several runs; lower is better).  Regenerate them with that command.", "",
             f"Machine: {machine()}.", f"Date: {datetime.date.today().isoformat()}.", ""]
    for name, title, results in sections:
        lines += [f"## `{name}`: {title}", "", "| figure | measured |", "|---|---:|"]
        lines += [f"| {label} | {value:.2f} |" for label, value in results.items()]
        lines.append("")
    DOC.write_text("\n".join(lines))
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
