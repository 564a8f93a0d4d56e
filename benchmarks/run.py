"""Run every benchmark in one process, print the table and write docs/benchmarks.md.

Each ``benchmarks/bench_*.py`` module has ``main(quick=False)`` returning a
``_common.Figures``: a ``dict[str, float]`` of label -> figure that also holds the rows of
time / plain time per tool, the single figures and the issues' targets.  The peers (HIPS
autograd, JAX, PyTorch; ``pip install ".[bench]"``) run in the same process as our code and the
plain code, so every ratio compares runs on the same machine state.

Run: ``python benchmarks/run.py`` (about ten minutes on two cores; writes docs/benchmarks.md and
docs/benchmarks.png), ``--no-write`` to print only, ``--quick`` for a smoke run of every
workload in small sizes (seconds; prints only).
"""

from __future__ import annotations

import datetime
import importlib
import os
import pathlib
import platform
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
DOCS = HERE.parent / "docs"
PAGE = DOCS / "benchmarks.md"
PLOT = DOCS / "benchmarks.png"
sys.path.insert(0, str(HERE))

from _common import PEERS, THREADS, TOOLS, Figures, peer_versions  # noqa: E402

PEER_NAMES = {"autograd": "autograd", "jax": "JAX (eager)", "torch": "PyTorch (eager)"}
COLUMNS = ["workload", "plain", "overdub", "target", *(PEER_NAMES[p] for p in PEERS), "reference"]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cpu}, {cores} cores; {platform.system()} {platform.release()}"


def versions() -> str:
    import numpy
    found = peer_versions()
    peers = ", ".join(f"{PEER_NAMES[p].split()[0]} {found[p]}" if found[p] else
                      f"{PEER_NAMES[p].split()[0]} not installed" for p in PEERS)
    return f"CPython {platform.python_version()}, NumPy {numpy.__version__}; peers: {peers}"


def threads() -> str:
    return ", ".join(f"`{name}={os.environ.get(name, '')}`" for name in THREADS)


def ratio_text(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}x"
    return f"{value:.1f}x" if value >= 10 else f"{value:.2f}x"


def seconds_text(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def verdict(value: float, target) -> str:
    return f"{target}: {'met' if target.met(value) else 'MISSED'}"


def table_rows(results: list[tuple[str, str, str, Figures]]) -> list[list[str]]:
    """One row per workload, across modules: the plain time, then time / plain per tool."""
    rows = []
    for _, _, _, fig in results:
        for workload, plain in fig.plain.items():
            cells = [workload, seconds_text(plain)]
            for tool in TOOLS:
                ratio = fig.ratio(workload, tool)
                cells.append(ratio_text(ratio) if ratio is not None
                             else fig.notes.get((workload, tool), ""))
                if tool == "overdub":
                    target = fig.targets.get(workload)
                    cells.append(verdict(ratio, target) if target and ratio is not None else "")
            cells.append("; ".join(f"{tool} {ratio_text(fig.ratio(workload, tool))}"
                                   for (row, tool) in fig.times
                                   if row == workload and tool not in TOOLS))
            rows.append(cells)
    return rows


def single_rows(fig: Figures) -> list[list[str]]:
    rows = []
    for label, unit in fig.units.items():
        value = fig[label]
        measured = ratio_text(value) if unit == "x" else f"{value:.3g} {unit}"
        target = fig.targets.get(label)
        rows.append([label, measured, verdict(value, target) if target else ""])
    return rows


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    return [line(header), "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header)))
            + "|", *(line(r) for r in rows)]


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for cells in [header, *rows]:
        out.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i])
                             for i, c in enumerate(cells)))
    return "\n".join(out)


def plot(results: list[tuple[str, str, str, Figures]], path: pathlib.Path) -> None:
    """Grouped bars, log scale: time / plain time per workload (rows) and tool (bars); a peer
    that refused a workload gets its note written where its bar would be."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.transforms import blended_transform_factory

    workloads = [(w, fig) for _, _, _, fig in results for w in fig.plain]
    tools = [*TOOLS, "reference"]
    width = 0.8 / len(tools)
    fig_, ax = plt.subplots(figsize=(11, 0.55 * len(workloads) + 2))
    left_edge = blended_transform_factory(ax.transAxes, ax.transData)
    for k, tool in enumerate(tools):
        ys = np.arange(len(workloads)) + (k - (len(tools) - 1) / 2) * width
        values = []
        for y, (workload, fig) in zip(ys, workloads):
            if tool == "reference":
                refs = [t for (row, t) in fig.times if row == workload and t not in TOOLS]
                values.append(fig.ratio(workload, refs[0]) if refs else np.nan)
                continue
            ratio = fig.ratio(workload, tool)
            values.append(np.nan if ratio is None else ratio)
            note = fig.notes.get((workload, tool))
            if ratio is None and note and note != "not installed":
                ax.text(0.005, y, f"{PEER_NAMES[tool].split()[0]}: {note}", fontsize=6,
                        va="center", transform=left_edge)
        label = {"reference": "reference (hand-written NumPy, cProfile, np.vectorize)"}.get(
            tool, PEER_NAMES.get(tool, tool))
        ax.barh(ys, values, height=width, label=label)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(np.arange(len(workloads)),
                  [w if len(w) <= 58 else w[:55] + "..." for w, _ in workloads], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time / plain time (log scale; lower is faster; 1 = the plain code)")
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    ax.grid(axis="x", which="both", alpha=0.3)
    fig_.tight_layout()
    fig_.savefig(path, dpi=110)
    plt.close(fig_)


def page(results, wall_s: float, load: tuple[float, float]) -> str:
    lines = [
        "# Benchmarks", "",
        "Figures from `python benchmarks/run.py`: every workload runs in one process under "
        "plain Python/NumPy, under overdub, and under each installed peer (HIPS autograd, eager "
        "JAX, eager PyTorch: `pip install \".[bench]\"`), and each figure is the best of several "
        "runs.  Ratios are time / plain time (lower is better); a peer's result is checked "
        "against ours before it is timed.  Regenerate the page with that command.", "",
        f"- Machine: {machine()}.",
        f"- Software: {versions()}.",
        f"- Date: {datetime.date.today().isoformat()}; the run took {wall_s / 60:.1f} minutes; "
        f"load average {load[0]:.1f} before it and {load[1]:.1f} after it (other work on the "
        f"machine makes every ratio noisier).",
        f"- Threads: {threads()} (set in `benchmarks/_common.py`: several libraries' thread "
        "pools in one process on a small machine wait on each other; override with the "
        "environment).",
        "- Nothing here ran on a GPU.", "",
        f"![Time / plain time per workload and tool, log scale]({PLOT.name})", "",
        "## Time / plain time", "",
        "Empty cells: the workload has no such comparison.  \"refuses\": the peer raised that "
        "error on the workload's faithful port (the mutation challenge).", "",
        *markdown_table(COLUMNS, table_rows(results)), "",
    ]
    for name, title, body, fig in results:
        lines += [f"## `{name}`: {title}", ""]
        if body:
            lines += [body, ""]
        singles = single_rows(fig)
        if singles:
            lines += markdown_table(["figure", "measured", "target"], singles) + [""]
        lines += [f"- {remark}" for remark in fig.remarks]
        if fig.remarks:
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    quick = "--quick" in sys.argv
    write = not quick and "--no-write" not in sys.argv
    sys.setrecursionlimit(10000)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    results = []
    for path in sorted(HERE.glob("bench_*.py")):
        module = importlib.import_module(path.stem)
        t = time.perf_counter()
        print(f"== {path.name}", flush=True)
        fig = module.main(quick=quick)
        print(f"   done in {time.perf_counter() - t:.0f} s", flush=True)
        doc = (module.__doc__ or "").strip().split("\n", 1)
        body = doc[1].strip() if len(doc) > 1 else ""
        body = "\n".join(line for line in body.splitlines() if not line.startswith("Run: "))
        results.append((path.name, doc[0].rstrip("."), body.strip(), fig))
    wall_s = time.perf_counter() - start
    print(f"\n{machine()}\n{versions()}\nthreads: {threads()}\n")
    if quick:
        print("QUICK RUN: small sizes, one run per workload and no warm-up: a smoke test, not "
              "a measurement")
    print("time / plain time per tool")
    print(text_table(COLUMNS, table_rows(results)))
    for name, _, _, fig in results:
        singles = single_rows(fig)
        if singles:
            print(f"\n{name}")
            print(text_table(["figure", "measured", "target"], singles))
        for remark in fig.remarks:
            print(f"  note: {remark}")
    print(f"\nwall time {wall_s:.0f} s")
    if write:
        plot(results, PLOT)
        PAGE.write_text(page(results, wall_s, (load_before, os.getloadavg()[0])) + "\n",
                        encoding="utf-8")
        print(f"wrote {PAGE} and {PLOT}")


if __name__ == "__main__":
    main()
